package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/stripepay"
)

// This file holds what the payment routes share when Stipend makes the
// Stripe object of a payment (Config.Stripe): the order of the calls, and
// Stripe's errors as problems.
//
// The Stripe object is made first, keyed by an idempotency key derived from
// the payment's and naming the payment's ID (derived from the key too), and
// the payment is created after it, linked, in one store call. A Stripe
// failure therefore leaves no payment; a store failure after it leaves a
// Stripe object nobody was shown, which the request's retry (same key)
// finds again at Stripe instead of making a second one.

// stripeFields maps the parameters Stripe names in its refusals to the
// request's fields.
var stripeFields = map[string]string{
	"amount":                                 "amount.cents",
	"currency":                               "amount.currency",
	"description":                            "description",
	"success_url":                            "successUrl",
	"cancel_url":                             "cancelUrl",
	"customer_email":                         "customerEmail",
	"line_items[0][price_data][unit_amount]": "amount.cents",
	"line_items[0][price_data][currency]":    "amount.currency",
}

// stripeProblem answers an error of a call to Stripe: a refusal of a
// request field is a 400 naming it; a reuse of the idempotency key with
// other parameters a 422; anything else a 502 carrying Stripe's request ID.
func stripeProblem(err error) error {
	var se *stripe.Error
	if !errors.As(err, &se) {
		return &Error{Status: http.StatusBadGateway, Kind: problem.ProviderError,
			Detail: "Stripe could not be reached; nothing was made, and retrying with the same Idempotency-Key is safe", Err: err}
	}
	name, named := stripeFields[se.Param]
	switch {
	case se.Code == stripe.ErrorCodeAmountTooSmall || se.Code == stripe.ErrorCodeAmountTooLarge:
		name, named = "amount.cents", true
	case se.Type == stripe.ErrorTypeIdempotency:
		return &Error{Status: http.StatusUnprocessableEntity, Kind: problem.IdempotencyKeyReused,
			Detail: "this Idempotency-Key was already used at Stripe with different parameters", ProviderRequestID: se.RequestID}
	}
	if named && se.Type == stripe.ErrorTypeInvalidRequest {
		e := Invalid(name, "refused by Stripe: "+se.Msg)
		e.ProviderRequestID = se.RequestID
		return e
	}
	return &Error{Status: http.StatusBadGateway, Kind: problem.ProviderError,
		Detail: "Stripe refused the request (" + string(se.Type) + "): " + se.Msg, ProviderRequestID: se.RequestID, Err: err}
}

// needStripe refuses a route that makes Stripe objects on a server without
// a Stripe secret key.
func (s *Server) needStripe(fieldName string) error {
	if s.stripe != nil {
		return nil
	}
	if fieldName != "" {
		return Invalid(fieldName, "is required: this server makes no Stripe objects (no Stripe secret key is configured)")
	}
	return &Error{Status: http.StatusServiceUnavailable, Kind: problem.Unavailable,
		Detail: "Stripe is not configured on this server (no Stripe secret key)"}
}

// earlier returns the payment made with key before, if any: (p, true) with
// the same fingerprint, a 422 with another.
func (s *Server) earlier(ctx context.Context, key, fingerprint string) (payment.Payment, bool, error) {
	p, err := s.store.FindPaymentByIdempotencyKey(ctx, key)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return payment.Payment{}, false, nil
	case err != nil:
		return payment.Payment{}, false, err
	case p.Fingerprint != fingerprint:
		return payment.Payment{}, false, &Error{Status: http.StatusUnprocessableEntity, Kind: problem.IdempotencyKeyReused,
			Detail: "this Idempotency-Key was already used for a payment with different parameters"}
	}
	return p, true, nil
}

// createLinked stores p, whose Stripe object was just made, answering
// Created false when a concurrent request with its key stored it first.
func (s *Server) createLinked(ctx context.Context, p payment.Payment) (store.CreatePaymentResult, error) {
	res, err := s.store.CreatePayment(ctx, p)
	if errors.Is(err, store.ErrConflict) {
		if _, ferr := s.store.FindPaymentByIdempotencyKey(ctx, p.IdempotencyKey); ferr == nil {
			return res, &Error{Status: http.StatusUnprocessableEntity, Kind: problem.IdempotencyKeyReused,
				Detail: "this Idempotency-Key was already used for a payment with different parameters"}
		}
	}
	return res, err
}

// intentPayment is the answer of POST /v1/payments for a payment whose
// PaymentIntent Stipend made: the payment and the intent's client secret,
// with which the payer confirms it (Stripe.js, or the mobile SDKs).
type intentPayment struct {
	payment.Payment
	ClientSecret string `json:"clientSecret,omitempty"`
}

// createIntentPayment makes the PaymentIntent of p and then p, linked to
// it. A retry with the key answers the payment and reads its intent's
// client secret from Stripe again.
func (s *Server) createIntentPayment(c echo.Context, p payment.Payment) error {
	ctx := storeCtx(c)
	if err := s.needStripe("providerIntentId"); err != nil {
		return err
	}
	if err := stripepay.CheckAmount(p.Amount); err != nil {
		return fieldErrorOf(err)
	}
	if prior, ok, err := s.earlier(ctx, p.IdempotencyKey, p.Fingerprint); err != nil || ok {
		if err != nil {
			return err
		}
		if prior.ProviderIntentID == "" {
			// Made before Stipend made PaymentIntents: there is none to read.
			return c.JSON(http.StatusOK, intentPayment{Payment: prior})
		}
		pi, err := s.stripe.PaymentIntent(ctx, prior.ProviderIntentID)
		if err != nil {
			return stripeProblem(err)
		}
		return c.JSON(http.StatusOK, intentPayment{Payment: prior, ClientSecret: pi.ClientSecret})
	}
	p.ID = stripepay.PaymentID(p.IdempotencyKey)
	pi, err := s.stripe.CreatePaymentIntent(ctx, &p, p.IdempotencyKey)
	if err != nil {
		return stripeProblem(err)
	}
	p.ProviderIntentID = pi.ID
	res, err := s.createLinked(ctx, p)
	return answer(c, createdStatus(res.Created), intentPayment{Payment: res.Payment, ClientSecret: pi.ClientSecret}, err)
}

// findPayments is GET /v1/payments?providerIntentId=: the payment linked
// to a provider intent, as a list of at most one.
func (s *Server) findPayments(c echo.Context) error {
	intent := c.QueryParam("providerIntentId")
	if intent == "" {
		return Invalid("providerIntentId", "is required")
	}
	if len(intent) > 255 {
		return Invalid("providerIntentId", "must be at most 255 characters")
	}
	p, err := s.store.FindPaymentByProviderIntentID(storeCtx(c), intent)
	if errors.Is(err, store.ErrNotFound) {
		return answerList(c, []payment.Payment{}, "", nil)
	}
	if err != nil {
		return err
	}
	return answerList(c, []payment.Payment{p}, "", nil)
}
