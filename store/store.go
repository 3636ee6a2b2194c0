// Package store defines the storage contract every Stipend backend fulfils:
// EntitlementStore (accounts, entitlements, consumption, payments, receipts
// and the event outbox) and DeliveryStore (webhook endpoints and deliveries,
// inbound provider events). The memory, Firestore and PostgreSQL adapters
// all pass the suites in package conformance.
//
// Rules that hold for every method:
//   - Errors are *Error values; classify them with errors.Is(err, ErrNotFound)
//     or CodeOf(err), never by comparing strings or backend codes.
//   - Input a method cannot accept is an Invalid error naming the field.
//   - Any method may fail with an Unavailable error when the backend cannot
//     serve it now (unreachable, too slow, or contention that outlasted the
//     adapter's own retries). The call then changed nothing, unless the error
//     is Uncertain (IsUncertain): a write whose answer was lost may have been
//     applied. Retrying is safe for every method below that is idempotent or
//     keyed; methods where contention is expected say so.
//   - Returned values are copies: mutating them never changes stored state.
//   - Every instant is stored and returned in UTC.
//   - A method documented as atomic either happens entirely or not at all,
//     also when the process dies half-way or the backend retries it.
//   - List methods answer an empty page, never ErrNotFound, for an owner
//     with no rows (or none at all).
package store

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
)

// MaxPageSize is the largest page any list method returns.
const MaxPageSize = 100

// Page asks for one page of a list. Limit ≤ 0 means MaxPageSize; larger values
// are clamped. Cursor is the NextCursor of the previous page, or "" for the first.
// A cursor is opaque and only valid for the same list and filter; a malformed
// one is an Invalid error.
type Page struct {
	Limit  int
	Cursor string
}

// Size returns the effective page size.
func (p Page) Size() int {
	if p.Limit <= 0 || p.Limit > MaxPageSize {
		return MaxPageSize
	}
	return p.Limit
}

// EntitlementFilter narrows ListEntitlements. Zero fields do not filter.
// Service matches entitlements whose scope service equals it or is "*".
type EntitlementFilter struct {
	Status  entitlement.Status
	Service string
	Type    entitlement.Type
}

// Outcome is the result kind of CheckAndConsume.
type Outcome string

// The consume outcomes.
const (
	// Consumed: this call charged an entitlement and created Consumption.
	Consumed Outcome = "consumed"
	// Replay: the key was already charged with the same parameters;
	// Consumption is the original, nothing was charged now.
	Replay Outcome = "replay"
	// Conflict: the key was already charged with different parameters;
	// nothing was charged. Consumption is zero.
	Conflict Outcome = "conflict"
	// Denied: no entitlement could pay ("no_longer_valid"); Denials says why
	// for every entitlement considered. Nothing was charged.
	Denied Outcome = "no_longer_valid"
	// Allowed is only returned by Check: the call would be charged to
	// Entitlement. Nothing was charged.
	Allowed Outcome = "allowed"
	// Held: Authorize reserved Hold on Entitlement.
	Held Outcome = "held"
	// Captured: CaptureHold charged the hold and created Consumption.
	Captured Outcome = "captured"
	// Released: ReleaseHold returned the whole hold.
	Released Outcome = "released"
)

// ConsumeResult is the answer of CheckAndConsume and Check. It holds values,
// not pointers, so answering a charge allocates nothing: the fields an
// outcome does not set are zero.
type ConsumeResult struct {
	Outcome Outcome
	// Consumption is the new consumption (Consumed) or the original one
	// (Replay).
	Consumption entitlement.Consumption
	// Entitlement is the charged entitlement as it is after the charge
	// (Consumed), or the one that would be charged (Allowed).
	Entitlement entitlement.Entitlement
	Denials     []entitlement.Denial
}

// HoldResult is the answer of Authorize, CaptureHold and ReleaseHold: the
// hold as it is after the call, the entitlement it is on (after the call;
// zero on Replay, Conflict and Denied), the consumption a capture made (also
// on its Replay), and Denials for Denied.
type HoldResult struct {
	Outcome     Outcome
	Hold        entitlement.Hold
	Entitlement entitlement.Entitlement
	Consumption entitlement.Consumption
	Denials     []entitlement.Denial
}

// RefundResult is the answer of RefundConsumption: the consumption with its
// refund and the entitlement after it. Replayed is true when the same refund
// had already been made and nothing changed now.
type RefundResult struct {
	Consumption entitlement.Consumption
	Entitlement entitlement.Entitlement
	Replayed    bool
}

// CreatePaymentResult is the answer of CreatePayment.
type CreatePaymentResult struct {
	Payment payment.Payment
	// Created is false when an earlier call with the same key made Payment.
	Created bool
}

// Completion is the answer of CompletePayment and RefundPayment.
type Completion struct {
	Payment      payment.Payment
	Receipt      receipt.Signed
	Entitlements []entitlement.Entitlement
	// Replayed is true when the payment was already in the target state and
	// nothing changed now.
	Replayed bool
}

// PaymentChange carries what CompletePayment, FailPayment and RefundPayment
// need besides the payment ID.
type PaymentChange struct {
	// Issuer and Sign make the receipt (complete and refund).
	Issuer string
	Sign   receipt.SignFunc
	// Reason is the failure reason (fail).
	Reason string
	// Inbound, if set, is the provider event causing the change. It is
	// recorded (see DeliveryStore.RecordInboundEvent: the same records) in the
	// same transaction as the change; if it was already recorded, nothing
	// changes and the call answers as a replay of the current state.
	Inbound *InboundEvent
}

// InboundEvent identifies a provider's event, such as a Stripe event ID.
type InboundEvent struct {
	Source  string
	EventID string
}

// EntitlementStore is the durable state of Stipend.
type EntitlementStore interface {
	ProviderPayments
	EntitlementUpdater // limits.go
	UsageReader        // usage.go
	TopUps             // topup.go
	PortalSessions     // portal.go
	Wallets            // wallet.go
	// UpsertAccount creates the account a.AgentID if absent, or updates its
	// DisplayName and Metadata if present (CreatedAt is kept), atomically.
	// It is idempotent and returns the stored account. An empty AgentID or
	// an unknown Kind is Invalid. Kind is set when the account is created
	// (agent, the zero kind, or wallet) and never changes: a zero Kind keeps
	// the stored one, another one is a Conflict naming the field kind. An
	// agent's kind is stored and shown as the zero kind.
	UpsertAccount(ctx context.Context, a entitlement.Account) (entitlement.Account, error)
	// GetAccount returns the account, or ErrNotFound.
	GetAccount(ctx context.Context, agentID string) (entitlement.Account, error)

	// CreateEntitlement stores e, which must pass e.Validate (Invalid
	// otherwise) and carry a new unique ID (Conflict if the ID exists), and
	// creates its account if absent. A zero Status becomes active and a zero
	// CreatedAt now. Atomic: the entitlement, the account and an
	// entitlement.granted outbox event are written together or not at all.
	CreateEntitlement(ctx context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error)
	// GetEntitlement returns the entitlement, or ErrNotFound. A pending lazy
	// quota reset is shown as applied (nothing is written).
	GetEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error)
	// ListEntitlements lists an agent's entitlements, oldest first (by
	// CreatedAt, then ID), with pending lazy quota resets shown as applied.
	ListEntitlements(ctx context.Context, agentID string, f EntitlementFilter, p Page) (items []entitlement.Entitlement, nextCursor string, err error)
	// RevokeEntitlement marks the entitlement revoked, releases its open
	// holds and writes an entitlement.revoked event, in ONE atomic step. It
	// is idempotent: revoking a revoked entitlement returns it unchanged and
	// writes nothing. ErrNotFound if absent. While calls charge the
	// entitlement it may answer Unavailable under contention; retrying is
	// safe.
	RevokeEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error)

	// CheckAndConsume charges one tool call, exactly once per (agent, key).
	// req is normalized first: a request that fails
	// entitlement.ConsumeRequest.Normalize is Invalid.
	//
	// If a consumption with ConsumptionKey(agent, key) exists: Replay with it
	// when its fingerprint equals req.Fingerprint(), else Conflict; a key
	// used by a hold (Authorize) is a Conflict too; nothing is charged then. Otherwise, with req.EntitlementID set, that entitlement is read,
	// checked (entitlement.Check) and charged, and the consumption created, in
	// ONE atomic step; without it, the agent's entitlements are tried in
	// entitlement.SortCandidates order, each in its own atomic step, until one
	// pays (Consumed) or all refuse (Denied with every reason; an agent with
	// none gets one not_found denial).
	//
	// Concurrent calls with the same key charge at most once: every one of
	// them gets Consumed (one) or Replay/Conflict (the rest). Contention on a
	// hot entitlement is the adapter's to absorb: it never surfaces as Denied
	// and never as an error while the backend is healthy. A backend failure is
	// an Unavailable error, and then the call was charged or not as a whole;
	// retrying with the same key is safe.
	CheckAndConsume(ctx context.Context, req entitlement.ConsumeRequest) (ConsumeResult, error)
	// Check answers what CheckAndConsume would do now, without writing:
	// Replay/Conflict for a used key, Allowed with the entitlement that would
	// pay, or Denied with every reason (one not_found denial for an agent with
	// no entitlement). Absence is an outcome, never an error; a request that
	// fails Normalize is Invalid.
	Check(ctx context.Context, req entitlement.ConsumeRequest) (ConsumeResult, error)
	// ListConsumptions lists an account's consumptions at or after since
	// (zero: all), oldest first (by OccurredAt, then ID): those whose
	// AgentID (the caller) or WalletID (the wallet a member charged) is
	// agentID, so an agent's show its charges to its wallets too and a
	// wallet's show its members' charges to it.
	ListConsumptions(ctx context.Context, agentID string, since time.Time, p Page) (items []entitlement.Consumption, nextCursor string, err error)
	// GetConsumption returns the consumption, or ErrNotFound.
	GetConsumption(ctx context.Context, id string) (entitlement.Consumption, error)
	// RefundConsumption gives amount (nil fields: all that was charged) of
	// consumption id back to its entitlement, marks the consumption refunded
	// and writes a consumption.refunded event, in ONE atomic step
	// (entitlement.Entitlement.Refund has the rules). A consumption is
	// refunded once: a second call with the same amount answers the stored
	// refund with Replayed true, another amount is a Conflict. ErrNotFound
	// for an unknown consumption; Invalid (a *field.Error inside)
	// for more than was charged, a wrong currency or a negative amount;
	// Conflict (wrapping entitlement.ErrRefundRefused) when the entitlement
	// is revoked or a quota consumption is from an earlier period.
	RefundConsumption(ctx context.Context, id string, amount entitlement.Amount) (RefundResult, error)

	// Authorize reserves, for one tool call, up to req's maximum on the
	// entitlement CheckAndConsume would charge: the same candidates in the
	// same order, the same denial reasons, each candidate in its own atomic
	// step (entitlement.Entitlement.Authorize). req is normalized first: a
	// request that fails entitlement.HoldRequest.Normalize (a TTL out of
	// bounds among others) is Invalid. The (agent, idempotency key) pair names one consume or one
	// hold, never both: a key already used by a consumption or a hold
	// answers Replay with the original hold (whatever its status now) when
	// its fingerprint equals req.Fingerprint(), else Conflict; nothing is
	// reserved then. Outcomes: Held, Replay, Conflict, Denied. Contention
	// rules are CheckAndConsume's.
	Authorize(ctx context.Context, req entitlement.HoldRequest) (HoldResult, error)
	// GetHold returns the hold, or ErrNotFound. A hold past its expiry that
	// no transaction has ended yet is shown expired (nothing is written).
	GetHold(ctx context.Context, id string) (entitlement.Hold, error)
	// CaptureHold ends the open hold id of agentID by charging amount (nil
	// fields: the hold's maximum; entitlement.Hold.Settle has the rules) and
	// creating the consumption (its HoldID names the hold), returning the
	// rest of the reservation, in ONE atomic step. Outcomes: Captured, or
	// Replay when the hold was already captured with the same amount.
	// Errors: ErrNotFound for an unknown hold or another agent's; Invalid
	// (a *field.Error inside) for an amount the hold does not
	// cover; Conflict for a hold released, or captured with another amount;
	// Conflict wrapping entitlement.ErrHoldExpired for a hold past its
	// expiry (which then ends expired, if it had not).
	CaptureHold(ctx context.Context, id, agentID string, amount entitlement.Amount) (HoldResult, error)
	// ReleaseHold ends the open hold id of agentID, returning all it
	// reserved, in ONE atomic step. Outcomes: Released, or Replay when the
	// hold had already been released or had expired (the result's hold says
	// which). ErrNotFound for an unknown hold or another agent's; Conflict
	// for a captured hold.
	ReleaseHold(ctx context.Context, id, agentID string) (HoldResult, error)
	// ExpireHolds ends the holds whose expiry has passed, on up to limit
	// entitlements, each entitlement in its own atomic step, and returns how
	// many holds it ended; a limit below 1 is Invalid. Every transaction that touches an entitlement
	// ends its expired holds too; this sweep is for idle entitlements. Many
	// instances may sweep at once: a hold ends exactly once.
	ExpireHolds(ctx context.Context, limit int) (int, error)

	// CreatePayment stores p, which must pass p.Validate (Invalid otherwise),
	// as a new pending payment (with a new ID when p.ID is empty), unless a
	// payment with p.IdempotencyKey exists: then, if its Fingerprint equals
	// p.Fingerprint, that payment is returned with Created false; otherwise
	// the result is ErrConflict. It is also a Conflict when p.ID exists or
	// p.ProviderIntentID is linked to another payment. Atomic: concurrent
	// calls with one key create exactly one payment.
	//
	// Under contention (concurrent calls with one key) a call may answer
	// Unavailable instead; it created nothing unless the error is Uncertain,
	// and retrying with the same key returns the one payment (with Created
	// false if the lost answer was the one that created it).
	CreatePayment(ctx context.Context, p payment.Payment) (CreatePaymentResult, error)
	// GetPayment returns the payment, or ErrNotFound.
	GetPayment(ctx context.Context, id string) (payment.Payment, error)
	// FindPaymentByIdempotencyKey returns the payment created with key, or ErrNotFound.
	FindPaymentByIdempotencyKey(ctx context.Context, key string) (payment.Payment, error)
	// FindPaymentByProviderIntentID returns the payment linked to a provider
	// intent (for example a Stripe PaymentIntent ID), or ErrNotFound.
	FindPaymentByProviderIntentID(ctx context.Context, intentID string) (payment.Payment, error)

	// CompletePayment moves a pending payment to succeeded in ONE atomic step
	// that also creates the entitlement of its grant, stores the receipt that
	// ch.Sign signs, and writes payment.succeeded and entitlement.granted
	// events. On a payment already succeeded (or refunded) it returns the
	// stored receipt and entitlements with Replayed true and changes nothing;
	// so it does, answering the payment as it is now, when ch.Inbound was
	// already recorded. ErrNotFound if the payment is absent; a failed
	// payment is a Conflict; no ch.Sign is Invalid. ch.Sign may run more than
	// once; it must be pure.
	//
	// Under contention (concurrent changes of the payment) it may answer
	// Unavailable; nothing changed unless the error is Uncertain, and
	// retrying is safe: a retry applies the change or replays it.
	CompletePayment(ctx context.Context, id string, ch PaymentChange) (Completion, error)
	// FailPayment moves a pending payment to failed with ch.Reason and writes
	// a payment.failed event, atomically. Failing a failed payment, or a
	// change with a ch.Inbound already recorded, returns the payment
	// unchanged; a succeeded or refunded payment is a Conflict. ErrNotFound
	// if absent. Under contention it may answer Unavailable, as
	// CompletePayment does; retrying is safe.
	FailPayment(ctx context.Context, id string, ch PaymentChange) (payment.Payment, error)
	// RefundPayment moves a succeeded payment to refunded in ONE atomic step
	// that revokes what remains of its grant, stores a refund receipt that
	// ch.Sign signs and writes payment.refunded and entitlement.revoked
	// events. Refunding a refunded payment returns the stored refund receipt
	// with Replayed true and changes nothing; so does a change whose
	// ch.Inbound was already recorded, answering the payment as it is now. A
	// pending or failed payment is a Conflict;
	// ErrNotFound if absent; no ch.Sign is Invalid. Under contention it may
	// answer Unavailable, as CompletePayment does; retrying is safe.
	RefundPayment(ctx context.Context, id string, ch PaymentChange) (Completion, error)

	// GetReceipt returns the receipt, or ErrNotFound.
	GetReceipt(ctx context.Context, id string) (receipt.Signed, error)
	// ListReceipts lists an agent's receipts, oldest first (by IssuedAt, then ID).
	ListReceipts(ctx context.Context, agentID string, p Page) (items []receipt.Signed, nextCursor string, err error)

	// PendingEvents returns up to limit (which must be positive) outbox
	// events not yet marked dispatched, oldest first. It writes nothing.
	PendingEvents(ctx context.Context, limit int) ([]event.Event, error)
	// MarkEventsDispatched marks events dispatched; unknown and already
	// dispatched IDs are ignored, so it is idempotent and never ErrNotFound.
	// It is not atomic across ids: a failed call may have marked some of
	// them, and calling it again is safe.
	MarkEventsDispatched(ctx context.Context, ids []string) error

	// Ping checks, without writing, that the backend answers. It is bounded
	// by ctx and used by /readyz.
	Ping(ctx context.Context) error

	// Close stops every goroutine the store started (coalescing lanes,
	// lease refills and timers, shared readers) and waits for them: calls
	// queued before it finish, calls after it fail with CodeUnavailable
	// (or, on a store without background work, still run). It releases
	// what this instance reserved (Firestore: its escrow leases) within a
	// bounded time. It does not close the client or pool the caller
	// passed in: the caller closes that after Close returns. Safe to call
	// more than once.
	Close() error
}
