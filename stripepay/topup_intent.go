package stripepay

import (
	"context"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/topup"
)

// CreateTopUpIntent makes and confirms the off-session PaymentIntent of
// top-up payment p, charging m (the customer and payment method saved for
// top-up), keyed by p's idempotency key (topup.PaymentKey: one per
// top-up, so a retry, or a sweep healing a crash, makes no second one). A
// refusal (a declined card, a method that needs the payer) is a
// *stripe.Error of type card_error, whose PaymentIntent, if any, is the
// refused intent.
func (c *Client) CreateTopUpIntent(ctx context.Context, p *payment.Payment, m topup.Method) (*stripe.PaymentIntent, error) {
	meta := c.metadata(p)
	meta[TopUpMetadataKey] = "true"
	params := &stripe.PaymentIntentCreateParams{
		Amount:        stripe.Int64(p.Amount.Cents),
		Currency:      stripe.String(strings.ToLower(p.Amount.Currency)),
		Customer:      stripe.String(m.Customer),
		PaymentMethod: stripe.String(m.PaymentMethod),
		Confirm:       stripe.Bool(true),
		OffSession:    stripe.Bool(true),
		Metadata:      meta,
	}
	if p.Description != "" {
		params.Description = stripe.String(p.Description)
	}
	params.SetIdempotencyKey(idempotencyKey("pi", p.IdempotencyKey))
	return c.sc.V1PaymentIntents.Create(ctx, params)
}
