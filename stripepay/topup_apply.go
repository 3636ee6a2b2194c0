package stripepay

import (
	"context"

	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// TopUpMetadataKey marks, in the metadata of an off-session PaymentIntent,
// that it is an auto top-up's.
const TopUpMetadataKey = "stipend_topup"

// settle ends the account's pending top-up when p is a top-up's payment
// that ended: a failure counts (and writes topup.failed), a success
// forgets the failures.
func (a *Applier) settle(ctx context.Context, p *payment.Payment) error {
	if !topup.IsTopUp(p) {
		return nil
	}
	_, err := a.Payments.SettleTopUp(ctx, p.AgentID)
	return err
}

// savedMethod returns the method a succeeded PaymentIntent saved for
// off-session use: its customer and payment method, when it was made with
// setup_future_usage=off_session.
func savedMethod(pi *stripe.PaymentIntent) (topup.Method, bool) {
	if pi.SetupFutureUsage != stripe.PaymentIntentSetupFutureUsageOffSession || pi.Customer == nil || pi.PaymentMethod == nil ||
		pi.Customer.ID == "" || pi.PaymentMethod.ID == "" {
		return topup.Method{}, false
	}
	return topup.Method{Customer: pi.Customer.ID, PaymentMethod: pi.PaymentMethod.ID}, true
}

// IntentFailed applies a failed attempt (payment_intent.payment_failed).
// For a payment a payer is paying, it changes nothing: the payer may try
// another method. A top-up's off-session attempt has no payer to try
// again, so its payment fails, with Stripe's reason, and the top-up
// counts the failure.
func (a *Applier) IntentFailed(ctx context.Context, pi *stripe.PaymentIntent, in *store.InboundEvent) (Result, error) {
	if pi.Metadata[TopUpMetadataKey] == "" {
		return Ignored, nil
	}
	p, ok, err := a.find(ctx, pi.Metadata, pi.ID)
	if !ok || err != nil || !topup.IsTopUp(&p) {
		return Ignored, err
	}
	return a.fail(ctx, &p, attemptFailure(pi.LastPaymentError), in)
}

// attemptFailure is the failure reason of a refused attempt.
func attemptFailure(e *stripe.Error) string {
	if e == nil {
		return "stripe: payment failed"
	}
	code := string(e.Code)
	if e.DeclineCode != "" {
		code += "/" + string(e.DeclineCode)
	}
	if code == "" {
		code = string(e.Type)
	}
	return "stripe: " + code + ": " + e.Msg
}
