// Package event holds the outbox events Stipend's stores write in the same
// transaction as the change they describe; the webhook dispatcher delivers them.
package event

import (
	"encoding/json"
	"time"
)

// Type names what happened.
type Type string

// The event types.
const (
	PaymentSucceeded    Type = "payment.succeeded"
	PaymentFailed       Type = "payment.failed"
	PaymentRefunded     Type = "payment.refunded"
	EntitlementGranted  Type = "entitlement.granted"
	EntitlementRevoked  Type = "entitlement.revoked"
	EntitlementDepleted Type = "entitlement.depleted"
	// ConsumptionRefunded: RefundConsumption gave (part of) a charge back;
	// data is the consumption with its refund.
	ConsumptionRefunded Type = "consumption.refunded"
)

// The events of payments with Stripe (docs/stripe.md); data is the payment.
const (
	// PaymentPartiallyRefunded: part of a succeeded payment was refunded
	// and taken off what is left of its credits grant; refundedAmount is
	// the total so far.
	PaymentPartiallyRefunded Type = "payment.partially_refunded"
	// PaymentDisputed: the payer disputed the charge; the grant was revoked
	// (an entitlement.revoked event each) and disputeReason says why.
	PaymentDisputed Type = "payment.disputed"
	// PaymentDisputeWon: the dispute was decided for the seller; what it
	// revoked is active again (an entitlement.granted event each).
	PaymentDisputeWon Type = "payment.dispute_won"
)

// The spend-control events.
const (
	// EntitlementBalanceLow: a charge or capture took what an entitlement
	// has left to or below an armed low-balance alert (entitlement.Alert),
	// once per crossing; data is the entitlement right after that charge,
	// its alerts showing which are triggered (and when).
	EntitlementBalanceLow Type = "entitlement.balance_low"
)

// The events of auto top-up (docs/stripe.md).
const (
	// TopUpFailed: an account's top-up failed (Stripe refused the
	// off-session charge); data is a topup.Failure, whose disabled says
	// whether top-up is now disabled (after three in a row).
	TopUpFailed Type = "topup.failed"
)

// The events of shared wallets; AgentID is the wallet's.
const (
	// WalletMemberAdded, WalletMemberUpdated, WalletMemberRemoved: an admin
	// added a member to a wallet, changed its order or caps, or removed it;
	// data is the membership (as it was, for a removal).
	WalletMemberAdded   Type = "wallet.member_added"
	WalletMemberUpdated Type = "wallet.member_updated"
	WalletMemberRemoved Type = "wallet.member_removed"
	// WalletMemberLimitReached: a charge took a member's spend of the
	// period to its cap's most, in the charge's transaction; data is an
	// entitlement.MemberLimitReached (the membership and the consumption ID).
	WalletMemberLimitReached Type = "wallet.member_limit_reached"
)

// Types lists every event type, in a stable order.
var Types = []Type{PaymentSucceeded, PaymentFailed, PaymentRefunded, EntitlementGranted, EntitlementRevoked, EntitlementDepleted, ConsumptionRefunded,
	PaymentPartiallyRefunded, PaymentDisputed, EntitlementBalanceLow, TopUpFailed, PaymentDisputeWon,
	WalletMemberAdded, WalletMemberUpdated, WalletMemberRemoved, WalletMemberLimitReached}

// Event is one outbox entry. Data is the JSON object delivered as the
// webhook's "data"; it is stored and sent as these exact bytes.
type Event struct {
	ID         string          `json:"id"`
	Type       Type            `json:"type"`
	AgentID    string          `json:"agentId,omitempty"`
	OccurredAt time.Time       `json:"occurredAt"`
	Data       json.RawMessage `json:"data"`
}
