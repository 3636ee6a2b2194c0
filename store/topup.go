package store

import (
	"context"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/topup"
)

// TopUps is auto top-up (package topup has the rules): an account's
// settings, the Stripe method its payer saved, and the steps that make one
// top-up per crossing of the threshold, whatever the instance count. The
// top-up is kept with the account, never with its entitlements, so a
// charge does not read or write it. Every method below is atomic.
type TopUps interface {
	// SaveTopUpMethod records the Stripe customer and payment method top-ups
	// of agentID charge (replacing any earlier one) and creates the account
	// if absent. An empty customer or payment method is Invalid.
	SaveTopUpMethod(ctx context.Context, agentID string, m topup.Method) (topup.TopUp, error)
	// PutTopUp makes s (which must pass s.Validate, Invalid otherwise) the
	// settings of agentID and enables top-up, which forgets earlier
	// failures (topup.Set). ErrNotFound for an unknown account; a Conflict
	// wrapping topup.ErrNoMethod when no method is saved.
	PutTopUp(ctx context.Context, agentID string, s topup.Settings) (topup.TopUp, error)
	// GetTopUp returns the top-up of agentID: the zero TopUp (with AgentID)
	// when none was ever set; ErrNotFound for an unknown account.
	GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error)
	// DisableTopUp disables top-up of agentID with reason (topup.Disable);
	// disabling a disabled one changes nothing. ErrNotFound for an unknown
	// account.
	DisableTopUp(ctx context.Context, agentID, reason string) (topup.TopUp, error)
	// BeginTopUp is the compare-and-set that begins one top-up: in ONE
	// atomic step it settles the account's pending top-up (SettleTopUp),
	// and, unless topup.Begin refuses (a Conflict wrapping
	// topup.ErrDisabled, ErrMoved when the sequence is not expectSeq,
	// ErrPending, ErrPaused or ErrDailyCap), increments the sequence, marks the
	// top-up pending and creates its pending payment (provider stripe,
	// keyed by topup.PaymentKey). Of concurrent calls with one expectSeq,
	// at most one begins. ErrNotFound for an unknown account.
	BeginTopUp(ctx context.Context, agentID string, expectSeq int64) (payment.Payment, error)
	// SettleTopUp ends the pending top-up of agentID if its payment has
	// ended (topup.Settle): a success forgets the failures; a failure
	// counts one, writes a topup.failed event (data: topup.Failure) and
	// disables top-up after topup.MaxFailures in a row. It is idempotent:
	// nothing pending, or a payment still pending, changes nothing.
	// ErrNotFound for an unknown account.
	SettleTopUp(ctx context.Context, agentID string) (topup.TopUp, error)
	// ListTopUps lists the top-ups a sweep looks at (topup.TopUp.Watched:
	// enabled, or one pending), each exactly once over the pages of one
	// walk, in an order of the store's that its cursor keeps (the stores
	// differ: memory by agent ID, PostgreSQL and Firestore oldest first);
	// the sweep needs no order.
	ListTopUps(ctx context.Context, p Page) (items []topup.TopUp, nextCursor string, err error)
}
