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

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// StripeSource is the inbound source name of Stripe events
// (store.InboundEvent.Source).
const StripeSource = "stripe"

// The Stripe event types Stripe reads; every other type is acknowledged and
// ignored.
const (
	StripePaymentSucceeded = "payment_intent.succeeded"
	// StripePaymentFailed reports a failed attempt, not a failed intent: the
	// intent goes back to requires_payment_method and the customer may still
	// pay with another method, after which payment_intent.succeeded arrives.
	// The payment stays pending; the attempt is logged.
	StripePaymentFailed = "payment_intent.payment_failed"
	// StripePaymentCanceled ends an intent for good: the payment fails.
	StripePaymentCanceled = "payment_intent.canceled"
	StripeChargeRefunded  = "charge.refunded"
)

// PaymentStore is the part of store.EntitlementStore that inbound provider
// events change.
type PaymentStore interface {
	FindPaymentByProviderIntentID(ctx context.Context, intentID string) (payment.Payment, error)
	CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error)
	FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error)
	RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error)
}

// Stripe applies verified Stripe webhook events to payments. Each change
// carries the Stripe event ID as store.PaymentChange.Inbound, which the store
// records in the same transaction as the change: a redelivered event
// changes nothing.
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

// stripeObject holds the fields Stripe reads from an event's data.object:
// a PaymentIntent (id, amount_received, currency, cancellation_reason,
// last_payment_error) or a Charge (payment_intent, refunded).
type stripeObject struct {
	ID                 string `json:"id"`
	AmountReceived     *int64 `json:"amount_received"`
	Currency           string `json:"currency"`
	PaymentIntent      string `json:"payment_intent"`
	Refunded           bool   `json:"refunded"`
	CancellationReason string `json:"cancellation_reason"`
	LastPaymentError   *struct {
		Message string `json:"message"`
	} `json:"last_payment_error"`
}

// checkAmount refuses a succeeded intent that received another amount than
// the payment's: completing it would grant what was not paid for. Stripe
// amounts are in the currency's smallest unit, as Money's are; Stripe
// writes currencies in lower case. An event without the fields (never one
// from Stripe) is not checked.
func (o *stripeObject) checkAmount(want money.Money) error {
	if o.AmountReceived == nil && o.Currency == "" {
		return nil
	}
	got := money.Money{Currency: strings.ToUpper(o.Currency)}
	if o.AmountReceived != nil {
		got.Cents = *o.AmountReceived
	}
	if got != want {
		return fmt.Errorf("intent %s received %d %s, the payment is %d %s", o.ID, got.Cents, got.Currency, want.Cents, want.Currency)
	}
	return nil
}

// failureReason says why an intent was canceled, for Payment.FailureReason:
// cleaned and capped as every failure reason is (payment.CleanFailureReason),
// since the event's text is the payer's bank's or Stripe's, of any length.
func (o *stripeObject) failureReason() string {
	r := "stripe: payment canceled"
	if o.CancellationReason != "" {
		r += " (" + o.CancellationReason + ")"
	}
	if o.LastPaymentError != nil && o.LastPaymentError.Message != "" {
		r += "; last attempt: " + o.LastPaymentError.Message
	}
	return payment.CleanFailureReason(r)
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
//     StripePaymentFailed), a partial refund, an intent no Stipend payment is
//     linked to (billing integrations create the payment before confirming
//     the intent), or a stale cancellation of a payment that already
//     succeeded.
//   - 400: the signature is missing or wrong, its timestamp is more than the
//     tolerance away from the clock (older or ahead), or the payload is
//     malformed.
//   - 409: the payment is not in a state the event can change (a success for
//     a failed payment, a refund before the success arrived): Stripe retries,
//     which resolves events that arrived out of order. Also a success whose
//     intent received another amount or currency than the payment's: nothing
//     is granted, and Stripe's retries give an operator time to look.
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
	typ := string(ev.Type)
	if typ != StripePaymentSucceeded && typ != StripePaymentFailed && typ != StripePaymentCanceled && typ != StripeChargeRefunded {
		return http.StatusOK, nil
	}
	var obj stripeObject
	if err := json.Unmarshal(ev.Data.Raw, &obj); err != nil {
		return http.StatusBadRequest, fmt.Errorf("stripe event %s: data.object: %w", ev.ID, err)
	}
	if typ == StripePaymentFailed {
		msg := ""
		if obj.LastPaymentError != nil {
			msg = obj.LastPaymentError.Message
		}
		h.logger().Info("stripe payment attempt failed; the payment stays pending until the intent succeeds or is canceled",
			"event", ev.ID, "intent", obj.ID, "error", msg)
		return http.StatusOK, nil
	}
	intent := obj.ID
	if typ == StripeChargeRefunded {
		intent = obj.PaymentIntent
		if !obj.Refunded {
			h.logger().Info("stripe partial refund ignored", "event", ev.ID, "charge", obj.ID)
			return http.StatusOK, nil
		}
	}
	if intent == "" {
		return http.StatusBadRequest, fmt.Errorf("stripe event %s: data.object names no payment intent", ev.ID)
	}
	p, err := h.Payments.FindPaymentByProviderIntentID(ctx, intent)
	if errors.Is(err, store.ErrNotFound) {
		h.logger().Warn("stripe event for an unknown payment intent ignored", "event", ev.ID, "type", typ, "intent", intent)
		return http.StatusOK, nil
	}
	if err != nil {
		return statusOf(err), err
	}
	ch := store.PaymentChange{Issuer: h.Issuer, Sign: h.Sign, Inbound: &store.InboundEvent{Source: StripeSource, EventID: ev.ID}}
	switch typ {
	case StripePaymentSucceeded:
		if err := obj.checkAmount(p.Amount); err != nil {
			h.logger().Error("stripe payment not completed: the intent received another amount than the payment's; "+
				"refund the intent at Stripe and fail the payment (POST /v1/payments/{id}/fail), or succeed it by hand",
				"event", ev.ID, "payment", p.ID, "err", err)
			return http.StatusConflict, err
		}
		_, err = h.Payments.CompletePayment(ctx, p.ID, ch)
	case StripePaymentCanceled:
		ch.Reason = obj.failureReason()
		_, err = h.Payments.FailPayment(ctx, p.ID, ch)
		if errors.Is(err, store.ErrConflict) {
			h.logger().Info("stale stripe cancellation ignored", "event", ev.ID, "payment", p.ID, "status", p.Status)
			return http.StatusOK, nil
		}
	case StripeChargeRefunded:
		if p.Status == payment.StatusFailed {
			// Never granted here (failed by a cancellation or by the billing
			// integration): nothing to revoke. Refusing would only make
			// Stripe retry for days.
			h.logger().Info("stripe refund of a failed payment acknowledged; nothing to revoke", "event", ev.ID, "payment", p.ID)
			return http.StatusOK, nil
		}
		_, err = h.Payments.RefundPayment(ctx, p.ID, ch)
	}
	if err != nil {
		h.logger().Warn("stripe event not applied", "event", ev.ID, "type", typ, "payment", p.ID, "err", err)
		return statusOf(err), err
	}
	return http.StatusOK, nil
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
