package payment

import "time"

// Checkout is the Stripe Checkout Session of a payment: where the payer
// pays, and until when. The session's PaymentIntent is made by Stripe when
// the payer pays; the payment is linked to it then (ProviderIntentID).
type Checkout struct {
	SessionID string    `json:"sessionId"`
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// MetadataKey is the metadata key, on the Stripe objects Stipend makes, that
// holds the Stipend payment ID: events and reads of those objects are linked
// to their payment by it first, by their PaymentIntent ID second.
const MetadataKey = "stipend_payment_id"

// IssuerMetadataKey is the metadata key, on the Stripe objects Stipend
// makes, that holds the receipts' issuer of the deployment that made them:
// a deployment ignores the events of another's objects on a Stripe account
// they share (a staging and a production service on one test account).
const IssuerMetadataKey = "stipend_issuer"
