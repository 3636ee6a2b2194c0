// Package receipt holds signed receipts: the payload, its RFC 8785 canonical
// form, Ed25519 signing as a compact JWS, the JWKS that publishes the keys,
// and offline verification.
package receipt

import (
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// Version is the receipt format version.
const Version = 1

// Kind says what a receipt records.
type Kind string

// The receipt kinds.
const (
	KindPayment Kind = "payment"
	KindRefund  Kind = "refund"
)

// Receipt is the signed statement that a payment was received (or refunded)
// and what it granted (or revoked). It is the JWS payload.
type Receipt struct {
	ID        string      `json:"id"`
	Version   int         `json:"version"`
	Kind      Kind        `json:"kind"`
	Issuer    string      `json:"issuer"`
	AgentID   string      `json:"agentId"`
	PaymentID string      `json:"paymentId"`
	Amount    money.Money `json:"amount"`
	Grants    []Grant     `json:"grants"`
	IssuedAt  time.Time   `json:"issuedAt"`
}

// Grant is one entitlement a receipt records as granted (or, on a refund
// receipt, revoked: a credits grant's Balance is then what remained; a
// quota grant shows its limit and period, whose use resets every period).
type Grant struct {
	EntitlementID string             `json:"entitlementId"`
	Type          entitlement.Type   `json:"type"`
	Scope         entitlement.Scope  `json:"scope"`
	Balance       money.Money        `json:"balance,omitzero"`
	Limit         int64              `json:"limit,omitempty"`
	Period        entitlement.Period `json:"period,omitempty"`
	ValidUntil    *time.Time         `json:"validUntil,omitempty"`
	ExpiresAt     *time.Time         `json:"expiresAt,omitempty"`
}

// GrantOf describes entitlement e as a receipt grant.
func GrantOf(e *entitlement.Entitlement) Grant {
	g := Grant{EntitlementID: e.ID, Type: e.Type, Scope: e.Scope, ExpiresAt: e.ExpiresAt}
	switch e.Type {
	case entitlement.TypeCredits:
		g.Balance = e.Credits.Balance
	case entitlement.TypeQuota:
		g.Limit, g.Period = e.Quota.Limit, e.Quota.Period
	case entitlement.TypeSubscription:
		if e.Subscription.ValidUntil != nil {
			t := *e.Subscription.ValidUntil
			g.ValidUntil = &t
		}
	}
	return g
}

// Signed is a stored receipt: the payload and its compact JWS.
type Signed struct {
	Receipt
	JWS string `json:"jws"`
}

// SignFunc signs a receipt and returns its compact JWS. Stores call it inside
// transactions that may run more than once, so it must be pure: the same
// receipt always yields an equally valid signature and nothing else happens.
type SignFunc func(Receipt) (string, error)
