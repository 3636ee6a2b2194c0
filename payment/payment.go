// Package payment holds payments, their lifecycle and the grant template a
// successful payment turns into an entitlement.
package payment

import (
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// Status is a payment's lifecycle state: pending → succeeded | failed, and
// succeeded → refunded.
type Status string

// The payment statuses.
const (
	StatusPending   Status = "pending"
	StatusSucceeded Status = "succeeded"
	StatusFailed    Status = "failed"
	StatusRefunded  Status = "refunded"
)

// CanBecome reports whether a payment in s may move to next.
func (s Status) CanBecome(next Status) bool {
	switch s {
	case StatusPending:
		return next == StatusSucceeded || next == StatusFailed
	case StatusSucceeded:
		return next == StatusRefunded
	}
	return false
}

// Move is what a request to move a payment to a status does.
type Move int

// The moves.
const (
	// Apply: the payment changes (CanBecome).
	Apply Move = iota
	// Replay: the payment is there already (or past it: a refunded payment
	// did succeed), so the request answers the current state.
	Replay
	// Refuse: its status does not allow the change (a Conflict).
	Refuse
)

// Toward says what a request to move a payment in s to target does. Both
// stores take their payment transitions from it.
func (s Status) Toward(target Status) Move {
	switch {
	case s == target, target == StatusSucceeded && s == StatusRefunded:
		return Replay
	case s.CanBecome(target):
		return Apply
	}
	return Refuse
}

// Provider is who collected the money.
type Provider string

// The payment providers.
const (
	ProviderStripe Provider = "stripe"
	ProviderManual Provider = "manual"
)

// Valid reports whether p is a known provider.
func (p Provider) Valid() bool { return p == ProviderStripe || p == ProviderManual }

// Payment is money an agent's payer has paid, or is paying, for a grant.
type Payment struct {
	ID               string      `json:"id"`
	AgentID          string      `json:"agentId"`
	Amount           money.Money `json:"amount"`
	Provider         Provider    `json:"provider"`
	ProviderIntentID string      `json:"providerIntentId,omitempty"`
	Description      string      `json:"description,omitempty"`
	Grant            Grant       `json:"grant"`
	Status           Status      `json:"status"`
	CreatedAt        time.Time   `json:"createdAt"`
	UpdatedAt        time.Time   `json:"updatedAt"`
	SucceededAt      *time.Time  `json:"succeededAt,omitempty"`
	FailedAt         *time.Time  `json:"failedAt,omitempty"`
	FailureReason    string      `json:"failureReason,omitempty"`
	RefundedAt       *time.Time  `json:"refundedAt,omitempty"`
	ReceiptID        string      `json:"receiptId,omitempty"`
	RefundReceiptID  string      `json:"refundReceiptId,omitempty"`
	EntitlementIDs   []string    `json:"entitlementIds,omitempty"`
	// RefundedAmount is what partial refunds gave back so far
	// (ProviderPayments.RefundPaymentPart); absent when none did.
	RefundedAmount *money.Money `json:"refundedAmount,omitempty"`
	// DisputedAt and DisputeReason are set when the payer disputed the
	// charge (ProviderPayments.DisputePayment): the grant was revoked.
	DisputedAt    *time.Time `json:"disputedAt,omitempty"`
	DisputeReason string     `json:"disputeReason,omitempty"`
	// DisputeWonAt is set when the dispute was decided for the seller
	// (ProviderPayments.WinDispute): what the dispute revoked was restored.
	DisputeWonAt *time.Time `json:"disputeWonAt,omitempty"`
	// Checkout is the Stripe Checkout Session the payer pays through, for
	// a payment made by POST /v1/checkout-sessions.
	Checkout *Checkout `json:"checkout,omitempty"`
	// IdempotencyKey and Fingerprint are how CreatePayment recognises a
	// retry; they are stored, never shown.
	IdempotencyKey string `json:"-"`
	Fingerprint    string `json:"-"`
}

// Grant is the template of the entitlement a successful payment creates.
// Credits grants get the payment's amount as their balance.
type Grant struct {
	Type       entitlement.Type   `json:"type"`
	Scope      entitlement.Scope  `json:"scope"`
	Limit      int64              `json:"limit,omitempty"`
	Period     entitlement.Period `json:"period,omitempty"`
	ValidUntil *time.Time         `json:"validUntil,omitempty"`
	ExpiresAt  *time.Time         `json:"expiresAt,omitempty"`
}

// Entitlement builds the entitlement g grants for payment p at now, with id.
// Its instants are g's as given: one already past at now makes an
// entitlement that is expired from the start (a payment whose grant expired
// before it succeeded still records what was paid for).
func (g Grant) Entitlement(id string, p *Payment, now time.Time) entitlement.Entitlement {
	e := entitlement.Entitlement{
		ID:        id,
		AgentID:   p.AgentID,
		Type:      g.Type,
		Scope:     g.Scope,
		Status:    entitlement.StatusActive,
		CreatedAt: now,
		ExpiresAt: entitlement.ClonePtr(g.ExpiresAt),
		PaymentID: p.ID,
	}
	switch g.Type {
	case entitlement.TypeCredits:
		e.Credits = entitlement.Credits{Balance: p.Amount, Granted: p.Amount}
	case entitlement.TypeQuota:
		e.Quota = entitlement.Quota{
			Limit: g.Limit, Period: g.Period, Remaining: g.Limit,
			Anchor: now, ResetAt: g.Period.NextBoundary(now, now),
		}
	case entitlement.TypeSubscription:
		e.Subscription = entitlement.Subscription{ValidFrom: now, ValidUntil: entitlement.ClonePtr(g.ValidUntil)}
	}
	return e
}
