package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// IntentPayment is the answer of CreateStripePayment: the payment and the
// client secret of the PaymentIntent Stipend made for it, with which the
// payer confirms the intent (Stripe.js, or Stripe's mobile SDKs).
type IntentPayment struct {
	payment.Payment
	ClientSecret string `json:"clientSecret,omitempty"`
}

// CreateStripePayment creates a pending stripe payment whose PaymentIntent
// Stipend makes (r.Provider is set to stripe; r.ProviderIntentID must be
// empty), idempotently on idempotencyKey as CreatePayment is: a retry with
// the key answers the same payment and intent. The server needs a Stripe
// secret key. A Stripe failure is a 502 problem (IsProviderError) that
// created nothing; retrying is safe. Role: billing, admin.
func (c *Client) CreateStripePayment(ctx context.Context, idempotencyKey string, r PaymentRequest) (p *IntentPayment, created bool, err error) {
	r.Provider = payment.ProviderStripe
	return create[IntentPayment](ctx, c, call{method: http.MethodPost, path: "/v1/payments", body: r, idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// CheckoutRequest is the body of POST /v1/checkout-sessions.
type CheckoutRequest struct {
	AgentID     string        `json:"agentId"`
	Amount      money.Money   `json:"amount"`
	Description string        `json:"description,omitempty"`
	Grant       payment.Grant `json:"grant"`
	// SuccessURL (required) and CancelURL are where Stripe sends the payer
	// after paying or giving up: absolute http or https URLs.
	SuccessURL    string `json:"successUrl"`
	CancelURL     string `json:"cancelUrl,omitempty"`
	CustomerEmail string `json:"customerEmail,omitempty"`
	// SaveForTopUp saves the payer's card (a Stripe customer and payment
	// method for off-session charges) for the agent's auto top-up
	// (PutTopUp).
	SaveForTopUp bool `json:"saveForTopUp,omitempty"`
}

func (r CheckoutRequest) check() error {
	if err := checkAgent("agentId", r.AgentID); err != nil {
		return err
	}
	return checkAmount("amount", r.Amount)
}

// CheckoutSession is the answer of CreateCheckoutSession: the pending
// payment, and where (URL) and until when the payer pays it.
type CheckoutSession struct {
	Payment   payment.Payment `json:"payment"`
	SessionID string          `json:"sessionId"`
	URL       string          `json:"url"`
	ExpiresAt time.Time       `json:"expiresAt"`
}

// CreateCheckoutSession makes a Stripe Checkout Session and the pending
// payment it pays, idempotently on idempotencyKey: a retry with the key
// answers the same session with created false. Send the payer to the
// answer's URL; Stripe's events (or Stipend's reconciliation sweep) then
// complete the payment and grant. The server needs a Stripe secret key
// (503 without). Role: billing, admin.
func (c *Client) CreateCheckoutSession(ctx context.Context, idempotencyKey string, r CheckoutRequest) (s *CheckoutSession, created bool, err error) {
	return create[CheckoutSession](ctx, c, call{method: http.MethodPost, path: "/v1/checkout-sessions", body: r, idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// FindPaymentByProviderIntent returns the payment linked to a provider
// intent (a Stripe PaymentIntent ID), with found false when none is.
// Role: billing, admin.
func (c *Client) FindPaymentByProviderIntent(ctx context.Context, intentID string) (p *payment.Payment, found bool, err error) {
	var out List[payment.Payment]
	q := url.Values{"providerIntentId": {intentID}}
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/payments", query: q, retry: true}, &out); err != nil {
		return nil, false, err
	}
	if len(out.Items) == 0 {
		return nil, false, nil
	}
	return &out.Items[0], true, nil
}

// IsProviderError reports whether err is a 502 provider-error problem:
// Stripe refused or did not answer a call Stipend made for the request.
// Problem.ProviderRequestID names Stripe's request, when Stripe answered.
func IsProviderError(err error) bool { return statusOf(err) == http.StatusBadGateway }
