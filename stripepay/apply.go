package stripepay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// Payments is the part of store.EntitlementStore that Stripe objects move.
type Payments interface {
	GetPayment(ctx context.Context, id string) (payment.Payment, error)
	FindPaymentByProviderIntentID(ctx context.Context, intentID string) (payment.Payment, error)
	LinkProviderIntent(ctx context.Context, id, intentID string) (payment.Payment, error)
	CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error)
	FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error)
	RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error)
	RefundPaymentPart(ctx context.Context, id string, total money.Money, ch store.PaymentChange) (store.Completion, error)
	DisputePayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error)
	WinDispute(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error)
	// Of store.TopUps: a payment that saves its method for top-up, and a
	// top-up's payment that ended (topup.go).
	SaveTopUpMethod(ctx context.Context, agentID string, m topup.Method) (topup.TopUp, error)
	SettleTopUp(ctx context.Context, agentID string) (topup.TopUp, error)
}

// ErrNotYet is the error of an object Stipend made (its metadata names a
// Stipend payment) whose payment the store does not show yet: the event
// arrived before the payment's creation committed. A webhook answers it
// non-2xx, so Stripe delivers it again.
var ErrNotYet = errors.New("stripe object names a Stipend payment the store does not show yet")

// ErrAmountMismatch is the error of a success that received another amount
// or currency than the payment's: nothing is granted.
var ErrAmountMismatch = errors.New("stripe received another amount than the payment's")

// Result says what applying an object did.
type Result int

// The results.
const (
	// Ignored: the object is not about a Stripe payment of Stipend's (no
	// metadata, no linked intent, or a manual payment), or its state
	// changes nothing (a failed attempt, an unpaid session, a stale
	// cancellation).
	Ignored Result = iota
	// Applied: the payment moved, or was already where the object says
	// (a replay changes nothing).
	Applied
)

// Applier moves payments to the state of their Stripe objects. Every change
// is a store transition (complete, fail, refund) that replays when made
// twice, so events, their redeliveries and the sweep, in any order, make
// one grant and one receipt.
type Applier struct {
	Payments Payments
	// Issuer and Sign make the receipts of completed and refunded payments.
	Issuer string
	Sign   receipt.SignFunc
	// Logger receives a line per ignored or refused object (nil: slog.Default()).
	Logger *slog.Logger
}

func (a *Applier) log() *slog.Logger {
	if a.Logger != nil {
		return a.Logger
	}
	return slog.Default()
}

// find returns the payment an object is about: the one its metadata names
// (ErrNotYet while the store does not show it), else the one linked to
// intentID. ok is false for an object that is not about a Stripe payment of
// this Stipend's (one made by another issuer's, see
// payment.IssuerMetadataKey): those are ignored.
func (a *Applier) find(ctx context.Context, meta map[string]string, intentID string) (p payment.Payment, ok bool, err error) {
	if err := readable(intentID, meta[payment.MetadataKey]); err != nil {
		return payment.Payment{}, false, err
	}
	if iss := meta[payment.IssuerMetadataKey]; iss != "" && a.Issuer != "" && iss != a.Issuer {
		a.log().Info("stripe object of another Stipend deployment ignored", "issuer", iss, "payment", meta[payment.MetadataKey])
		return payment.Payment{}, false, nil
	}
	if id := meta[payment.MetadataKey]; id != "" {
		p, err = a.Payments.GetPayment(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return payment.Payment{}, false, fmt.Errorf("payment %s: %w", id, ErrNotYet)
		}
	} else if intentID != "" {
		p, err = a.Payments.FindPaymentByProviderIntentID(ctx, intentID)
		if errors.Is(err, store.ErrNotFound) {
			return payment.Payment{}, false, nil
		}
	} else {
		return payment.Payment{}, false, nil
	}
	if err != nil {
		return payment.Payment{}, false, err
	}
	if p.Provider != payment.ProviderStripe {
		// A manual payment is moved by its billing integration only.
		a.log().Info("stripe object about a manual payment ignored", "payment", p.ID, "intent", intentID)
		return payment.Payment{}, false, nil
	}
	if intentID != "" && p.ProviderIntentID != intentID {
		// A Checkout payment learns its PaymentIntent from Stripe.
		p, err = a.Payments.LinkProviderIntent(ctx, p.ID, intentID)
		if err != nil {
			return payment.Payment{}, false, err
		}
	}
	return p, true, nil
}

func (a *Applier) change(in *store.InboundEvent) store.PaymentChange {
	return store.PaymentChange{Issuer: a.Issuer, Sign: a.Sign, Inbound: in}
}

// complete completes p after checking what Stripe received: the amount and
// the currency must both be the payment's. An object that names no currency
// says nothing about what was received, so it grants nothing either.
func (a *Applier) complete(ctx context.Context, p *payment.Payment, cents int64, currency stripe.Currency, in *store.InboundEvent) error {
	got := money.Money{Cents: cents, Currency: strings.ToUpper(string(currency))}
	if got != p.Amount {
		a.log().Error("stripe payment not completed: Stripe received another amount than the payment's (or named no currency); "+
			"refund it at Stripe and fail the payment (POST /v1/payments/{id}/fail), or succeed it by hand",
			"payment", p.ID, "received", fmt.Sprintf("%d %q", got.Cents, got.Currency))
		return fmt.Errorf("payment %s: received %d %q, the payment is %d %s: %w",
			p.ID, got.Cents, got.Currency, p.Amount.Cents, p.Amount.Currency, ErrAmountMismatch)
	}
	if _, err := a.Payments.CompletePayment(ctx, p.ID, a.change(in)); err != nil {
		return err
	}
	return a.settle(ctx, p)
}

// fail fails p with reason; a payment that succeeded meanwhile stays as it
// is (a stale cancellation or expiry).
func (a *Applier) fail(ctx context.Context, p *payment.Payment, reason string, in *store.InboundEvent) (Result, error) {
	ch := a.change(in)
	ch.Reason = payment.CleanFailureReason(reason)
	_, err := a.Payments.FailPayment(ctx, p.ID, ch)
	if errors.Is(err, store.ErrConflict) {
		a.log().Info("stale stripe failure ignored", "payment", p.ID, "reason", ch.Reason)
		return Ignored, nil
	}
	if err != nil {
		return Ignored, err
	}
	return Applied, a.settle(ctx, p)
}

// IntentSucceeded completes the payment of a succeeded PaymentIntent, and
// saves its customer and payment method for top-up when the payer agreed
// to off-session charges (a Checkout Session made with SaveForTopUp).
func (a *Applier) IntentSucceeded(ctx context.Context, pi *stripe.PaymentIntent, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.find(ctx, pi.Metadata, pi.ID)
	if !ok || err != nil {
		return Ignored, err
	}
	if err := a.complete(ctx, &p, pi.AmountReceived, pi.Currency, in); err != nil {
		return Applied, err
	}
	if m, ok := savedMethod(pi); ok {
		if _, err := a.Payments.SaveTopUpMethod(ctx, p.AgentID, m); err != nil {
			return Applied, err
		}
		a.log().Info("stripe payment method saved for top-up", "payment", p.ID, "agent", p.AgentID, "customer", m.Customer)
	}
	return Applied, nil
}

// IntentCanceled fails the payment of a canceled PaymentIntent.
func (a *Applier) IntentCanceled(ctx context.Context, pi *stripe.PaymentIntent, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.find(ctx, pi.Metadata, pi.ID)
	if !ok || err != nil {
		return Ignored, err
	}
	r := "stripe: payment canceled"
	if pi.CancellationReason != "" {
		r += " (" + string(pi.CancellationReason) + ")"
	}
	if pi.LastPaymentError != nil && pi.LastPaymentError.Msg != "" {
		r += "; last attempt: " + pi.LastPaymentError.Msg
	}
	return a.fail(ctx, &p, r, in)
}

// sessionIntent returns the ID of a session's PaymentIntent, or "".
func sessionIntent(s *stripe.CheckoutSession) string {
	if s.PaymentIntent != nil {
		return s.PaymentIntent.ID
	}
	return ""
}

// SessionCompleted applies a completed Checkout Session: a paid one
// completes its payment; an unpaid one (a delayed payment method) links the
// payment to its PaymentIntent and leaves it pending until the async
// payment succeeds or fails.
func (a *Applier) SessionCompleted(ctx context.Context, s *stripe.CheckoutSession, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.find(ctx, s.Metadata, sessionIntent(s))
	if !ok || err != nil {
		return Ignored, err
	}
	if s.PaymentStatus == stripe.CheckoutSessionPaymentStatusUnpaid {
		a.log().Info("stripe checkout completed unpaid; the payment stays pending until the async payment ends", "payment", p.ID, "session", s.ID)
		return Ignored, nil
	}
	return Applied, a.complete(ctx, &p, s.AmountTotal, s.Currency, in)
}

// SessionAsyncSucceeded completes the payment of a session whose delayed
// payment succeeded.
func (a *Applier) SessionAsyncSucceeded(ctx context.Context, s *stripe.CheckoutSession, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.find(ctx, s.Metadata, sessionIntent(s))
	if !ok || err != nil {
		return Ignored, err
	}
	return Applied, a.complete(ctx, &p, s.AmountTotal, s.Currency, in)
}

// SessionFailed fails the payment of a session whose delayed payment failed
// (async) or that expired unpaid (expired).
func (a *Applier) SessionFailed(ctx context.Context, s *stripe.CheckoutSession, why string, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.find(ctx, s.Metadata, sessionIntent(s))
	if !ok || err != nil {
		return Ignored, err
	}
	return a.fail(ctx, &p, "stripe: checkout session "+why, in)
}

// ChargeRefunded applies a refund of a payment's charge: in full, it
// revokes what is left of the grant; in part, it takes the refunded amount
// (the charge's amount_refunded, a running total) off what is left of a
// credits grant. Either way a refund receipt is issued. A failed payment
// has nothing to revoke.
func (a *Applier) ChargeRefunded(ctx context.Context, ch *stripe.Charge, in *store.InboundEvent) (Result, error) {
	intent := ""
	if ch.PaymentIntent != nil {
		intent = ch.PaymentIntent.ID
	}
	if intent == "" && ch.Metadata[payment.MetadataKey] == "" {
		return Ignored, errNoIntent
	}
	p, ok, err := a.find(ctx, ch.Metadata, intent)
	if !ok || err != nil {
		return Ignored, err
	}
	if p.Status == payment.StatusFailed {
		// Never granted (failed by a cancellation or by the billing
		// integration): nothing to revoke. Refusing would only make Stripe
		// retry for days.
		a.log().Info("stripe refund of a failed payment acknowledged; nothing to revoke", "payment", p.ID)
		return Ignored, nil
	}
	if !ch.Refunded && (ch.Amount == 0 || ch.AmountRefunded < ch.Amount) {
		total := money.Money{Cents: ch.AmountRefunded, Currency: strings.ToUpper(string(ch.Currency))}
		if total.Currency == "" {
			total.Currency = p.Amount.Currency
		}
		if total.Cents <= 0 {
			return Ignored, nil
		}
		_, err = a.Payments.RefundPaymentPart(ctx, p.ID, total, a.change(in))
		return Applied, err
	}
	_, err = a.Payments.RefundPayment(ctx, p.ID, a.change(in))
	return Applied, err
}

// DisputeCreated revokes what is left of the grant of a payment whose
// charge the payer disputed, recording the dispute's reason. A dispute of
// a refunded payment changes nothing; of a failed one, neither.
func (a *Applier) DisputeCreated(ctx context.Context, d *stripe.Dispute, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.disputed(ctx, d)
	if !ok || err != nil {
		return Ignored, err
	}
	if p.Status == payment.StatusFailed {
		a.log().Info("stripe dispute of a failed payment acknowledged; nothing to revoke", "payment", p.ID)
		return Ignored, nil
	}
	ch := a.change(in)
	ch.Reason = payment.CleanFailureReason(fmt.Sprintf("stripe: dispute %s opened (%s)", d.ID, d.Reason))
	_, err = a.Payments.DisputePayment(ctx, p.ID, ch)
	if err == nil {
		a.log().Warn("stripe dispute opened: the payment's grant is revoked; answer the dispute at Stripe", "payment", p.ID, "dispute", d.ID, "reason", string(d.Reason))
	}
	return Applied, err
}

// DisputeClosed restores what a dispute revoked when the dispute was won
// (charge.dispute.closed with status won): the entitlements are active
// again with what they had left. A lost dispute changes nothing (the
// grant stays revoked); a dispute of a payment never recorded as disputed
// is acknowledged and changes nothing either.
func (a *Applier) DisputeClosed(ctx context.Context, d *stripe.Dispute, in *store.InboundEvent) (Result, error) {
	p, ok, err := a.disputed(ctx, d)
	if !ok || err != nil {
		return Ignored, err
	}
	if d.Status != stripe.DisputeStatusWon {
		a.log().Info("stripe dispute closed, not won: the grant stays revoked", "payment", p.ID, "dispute", d.ID, "status", string(d.Status))
		return Ignored, nil
	}
	if p.DisputedAt == nil {
		a.log().Info("stripe dispute won for a payment Stipend never saw disputed; nothing to restore", "payment", p.ID, "dispute", d.ID)
		return Ignored, nil
	}
	_, err = a.Payments.WinDispute(ctx, p.ID, a.change(in))
	if err == nil {
		a.log().Info("stripe dispute won: the payment's grant is restored", "payment", p.ID, "dispute", d.ID)
	}
	return Applied, err
}

// disputed finds the payment of the dispute d's charge.
func (a *Applier) disputed(ctx context.Context, d *stripe.Dispute) (payment.Payment, bool, error) {
	intent := ""
	switch {
	case d.PaymentIntent != nil:
		intent = d.PaymentIntent.ID
	case d.Charge != nil && d.Charge.PaymentIntent != nil:
		intent = d.Charge.PaymentIntent.ID
	}
	if intent == "" && d.Metadata[payment.MetadataKey] == "" {
		return payment.Payment{}, false, errNoIntent
	}
	return a.find(ctx, d.Metadata, intent)
}

// errNoIntent is a charge that names no PaymentIntent.
var errNoIntent = errors.New("the charge names no payment intent")

// errNUL is an object whose identifiers hold U+0000. No Stripe object does,
// none can name a payment of Stipend's (its API refuses U+0000 in every
// string), and PostgreSQL could not even look one up.
var errNUL = errors.New("an identifier of the object contains U+0000 (NUL)")

// readable refuses identifiers that hold U+0000 (errNUL).
func readable(ids ...string) error {
	for _, id := range ids {
		if strings.IndexByte(id, 0) >= 0 {
			return errNUL
		}
	}
	return nil
}

// ErrMalformed reports an object Stipend cannot read (it names no intent,
// or an identifier holds U+0000); a webhook answers 400. A 400 rather than
// an acknowledgement: such an object is none Stripe makes, so nothing real
// waits on it, and Stripe's dashboard shows the operator the refused
// deliveries instead of Stipend dropping a signed event unseen.
func ErrMalformed(err error) bool { return errors.Is(err, errNoIntent) || errors.Is(err, errNUL) }
