package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stripe/stripe-go/v82"
	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/stripepay"
)

// StripeSource is the inbound source name of Stripe events
// (store.InboundEvent.Source).
const StripeSource = "stripe"

// The Stripe event types Stipend reads; every other type is acknowledged and
// ignored. docs/stripe.md says what each one does.
const (
	StripePaymentSucceeded = "payment_intent.succeeded"
	// StripePaymentFailed reports a failed attempt, not a failed intent: the
	// intent goes back to requires_payment_method and the customer may still
	// pay with another method, after which payment_intent.succeeded arrives.
	// The payment stays pending; the attempt is logged. An auto top-up's
	// off-session attempt has no payer to try again: its payment fails.
	StripePaymentFailed = "payment_intent.payment_failed"
	// StripePaymentCanceled ends an intent for good: the payment fails.
	StripePaymentCanceled = "payment_intent.canceled"
	// StripeChargeRefunded revokes the grant of a payment refunded in
	// full; a partial refund takes the refunded amount off its credits.
	StripeChargeRefunded = "charge.refunded"
	// StripeDisputeCreated revokes the grant of a disputed payment.
	StripeDisputeCreated = "charge.dispute.created"
	// StripeDisputeClosed restores the grant of a payment whose dispute
	// was won.
	StripeDisputeClosed = "charge.dispute.closed"
	// StripeCheckoutCompleted completes the payment of a paid session; an
	// unpaid one (a delayed payment method) stays pending until
	// StripeCheckoutAsyncSucceeded or StripeCheckoutAsyncFailed.
	StripeCheckoutCompleted      = "checkout.session.completed"
	StripeCheckoutAsyncSucceeded = "checkout.session.async_payment_succeeded"
	StripeCheckoutAsyncFailed    = "checkout.session.async_payment_failed"
	// StripeCheckoutExpired fails the payment of a session never paid.
	StripeCheckoutExpired = "checkout.session.expired"
)

// PaymentStore is the part of store.EntitlementStore that inbound provider
// events change.
type PaymentStore = stripepay.Payments

// Stripe applies verified Stripe webhook events to payments, through a
// stripepay.Applier. Each change carries the Stripe event ID as
// store.PaymentChange.Inbound, which the store records in the same
// transaction as the change: a redelivered event changes nothing.
type Stripe struct {
	Payments PaymentStore
	// Secret is the endpoint's signing secret (whsec_… from Stripe). Without
	// it every event is refused with 503, so Stripe keeps retrying until an
	// operator configures it.
	Secret string
	// Issuer and Sign make the receipts of completed and refunded payments.
	Issuer string
	Sign   receipt.SignFunc
	// Tolerance is how far a signature's timestamp may be from the clock,
	// behind or ahead (default 5 min).
	Tolerance time.Duration
	// Logger receives one line per ignored or refused event (default slog.Default()).
	Logger *slog.Logger
}

// signedAt returns the timestamp (t=) of a Stripe-Signature header that
// stripewebhook has verified, read as the library reads it (the last t=).
// The library refuses a timestamp older than the tolerance but not one
// ahead of the clock; Handle refuses those with it.
func signedAt(header string) (time.Time, bool) {
	var at time.Time
	ok := false
	for _, pair := range strings.Split(header, ",") {
		if v, found := strings.CutPrefix(pair, "t="); found {
			sec, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return time.Time{}, false
			}
			at, ok = time.Unix(sec, 0), true
		}
	}
	return at, ok
}

// Handle verifies the Stripe-Signature header sig over payload and applies
// the event. It returns the HTTP status to answer and, for any status but
// 200, the reason:
//
//   - 200: applied, replayed (seen before), or deliberately ignored: an
//     unknown event type, a failed attempt (the payment stays pending, see
//     StripePaymentFailed), an object this Stipend did not make (no
//     Stipend metadata, or another issuer's) and no payment is linked to,
//     a manual payment's intent, or a stale cancellation or expiry of a
//     payment that already succeeded.
//   - 400: the signature is missing or wrong, its timestamp is more than the
//     tolerance away from the clock (older or ahead), or the payload is
//     malformed (an identifier holding U+0000 included: see
//     stripepay.ErrMalformed).
//   - 409: an object Stipend made whose payment the store does not show yet
//     (an event that overtook the payment's creation), or a payment not in
//     a state the event can change (a success for a failed payment, a
//     refund before the success arrived): Stripe retries, which resolves
//     events that arrived out of order. Also a success that received
//     another amount or currency than the payment's: nothing is granted,
//     and Stripe's retries give an operator time to look.
//   - 503: no secret is configured, or the store is unavailable.
//   - 500: anything else.
func (h *Stripe) Handle(ctx context.Context, payload []byte, sig string) (int, error) {
	if h.Secret == "" {
		return http.StatusServiceUnavailable, errors.New("stripe webhook secret is not configured")
	}
	tol := h.Tolerance
	if tol <= 0 {
		tol = 5 * time.Minute
	}
	ev, err := stripewebhook.ConstructEventWithOptions(payload, sig, h.Secret, stripewebhook.ConstructEventOptions{
		Tolerance: tol,
		// Stipend reads a few stable fields; it accepts any API version.
		IgnoreAPIVersionMismatch: true,
	})
	if err != nil {
		return http.StatusBadRequest, fmt.Errorf("stripe event: %w", err)
	}
	if at, ok := signedAt(sig); !ok || time.Until(at) > tol {
		return http.StatusBadRequest, fmt.Errorf("stripe event: signature timestamp is more than %s ahead of the clock", tol)
	}
	if ev.ID == "" || ev.Data == nil {
		return http.StatusBadRequest, errors.New("stripe event: no id or data")
	}
	if strings.IndexByte(ev.ID, 0) >= 0 {
		return http.StatusBadRequest, errors.New("stripe event: its id contains U+0000 (NUL), which no Stripe event's does")
	}
	typ := string(ev.Type)
	apply, known := h.appliers()[typ]
	if !known {
		return http.StatusOK, nil
	}
	_, err = apply(ctx, ev.Data.Raw, &store.InboundEvent{Source: StripeSource, EventID: ev.ID})
	var bad *malformed
	switch {
	case err == nil:
		return http.StatusOK, nil
	case errors.As(err, &bad), stripepay.ErrMalformed(err):
		return http.StatusBadRequest, fmt.Errorf("stripe event %s: data.object: %w", ev.ID, err)
	case errors.Is(err, stripepay.ErrNotYet):
		h.logger().Info("stripe event for a payment not visible yet; Stripe will deliver it again", "event", ev.ID, "type", typ, "err", err)
		return http.StatusConflict, err
	case errors.Is(err, stripepay.ErrAmountMismatch):
		return http.StatusConflict, err
	}
	h.logger().Warn("stripe event not applied", "event", ev.ID, "type", typ, "err", err)
	return statusOf(err), err
}

// malformed is a data.object that does not decode as its event type's object.
type malformed struct{ err error }

func (m *malformed) Error() string { return m.err.Error() }

// applyFunc applies one event's data.object.
type applyFunc func(ctx context.Context, raw []byte, in *store.InboundEvent) (stripepay.Result, error)

// decoded returns an applyFunc that decodes data.object into a T (a
// stripe-go object) and hands it to f.
func decoded[T any](f func(context.Context, *T, *store.InboundEvent) (stripepay.Result, error)) applyFunc {
	return func(ctx context.Context, raw []byte, in *store.InboundEvent) (stripepay.Result, error) {
		var obj T
		if err := json.Unmarshal(raw, &obj); err != nil {
			return stripepay.Ignored, &malformed{err}
		}
		return f(ctx, &obj, in)
	}
}

// appliers maps each event type Stipend reads to what it does.
func (h *Stripe) appliers() map[string]applyFunc {
	a := &stripepay.Applier{Payments: h.Payments, Issuer: h.Issuer, Sign: h.Sign, Logger: h.logger()}
	failed := func(why string) applyFunc {
		return decoded(func(ctx context.Context, s *stripe.CheckoutSession, in *store.InboundEvent) (stripepay.Result, error) {
			return a.SessionFailed(ctx, s, why, in)
		})
	}
	return map[string]applyFunc{
		StripePaymentSucceeded: decoded(a.IntentSucceeded),
		StripePaymentCanceled:  decoded(a.IntentCanceled),
		StripePaymentFailed: decoded(func(ctx context.Context, pi *stripe.PaymentIntent, in *store.InboundEvent) (stripepay.Result, error) {
			if res, err := a.IntentFailed(ctx, pi, in); res == stripepay.Applied || err != nil {
				return res, err // an auto top-up's attempt: its payment failed
			}
			msg := ""
			if pi.LastPaymentError != nil {
				msg = pi.LastPaymentError.Msg
			}
			h.logger().Info("stripe payment attempt failed; the payment stays pending until the intent succeeds or is canceled",
				"intent", pi.ID, "error", msg)
			return stripepay.Ignored, nil
		}),
		StripeChargeRefunded:         decoded(a.ChargeRefunded),
		StripeDisputeCreated:         decoded(a.DisputeCreated),
		StripeDisputeClosed:          decoded(a.DisputeClosed),
		StripeCheckoutCompleted:      decoded(a.SessionCompleted),
		StripeCheckoutAsyncSucceeded: decoded(a.SessionAsyncSucceeded),
		StripeCheckoutAsyncFailed:    failed("async payment failed"),
		StripeCheckoutExpired:        failed("expired"),
	}
}

func (h *Stripe) logger() *slog.Logger {
	if h.Logger != nil {
		return h.Logger
	}
	return slog.Default()
}

// statusOf maps a store error to the status Stripe should see.
func statusOf(err error) int {
	switch store.CodeOf(err) {
	case store.CodeConflict:
		return http.StatusConflict
	case store.CodeUnavailable:
		return http.StatusServiceUnavailable
	case store.CodeInvalid:
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
