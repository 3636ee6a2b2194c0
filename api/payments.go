package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// HeaderIdempotencyKey carries the key that makes POST /v1/payments
// idempotent, read by the same rule as the ledger routes' (idempotency.ParseKey).
const HeaderIdempotencyKey = idempotency.HeaderKey

func (s *Server) registerPayments(g group) {
	billing := s.auth(apikey.RoleBilling)
	g.POST("/payments", s.createPayment, billing)
	g.GET("/payments/:id", getBy(idParam, s.store.GetPayment), billing)
	g.POST("/payments/:id/succeed", s.settle("succeed", s.store.CompletePayment), billing)
	g.POST("/payments/:id/fail", s.failPayment, billing)
	g.POST("/payments/:id/refund", s.settle("refund", s.store.RefundPayment), billing)
}

// paymentBody is the body of POST /v1/payments.
type paymentBody struct {
	AgentID          string           `json:"agentId" validate:"required,name"`
	Amount           *money.Money     `json:"amount" validate:"required"`
	Provider         payment.Provider `json:"provider" validate:"required,oneof=stripe manual"`
	ProviderIntentID string           `json:"providerIntentId" validate:"omitempty,max=255,printascii"`
	Description      string           `json:"description" validate:"max=1000"`
	Grant            *grantBody       `json:"grant" validate:"required"`
}

// Validate checks the rules across fields.
func (b *paymentBody) Validate() error {
	if b.Amount.Cents <= 0 {
		return Invalid("amount.cents", "must be positive")
	}
	if b.Provider == payment.ProviderManual && b.ProviderIntentID != "" {
		return Invalid("providerIntentId", "only a stripe payment is linked to a provider intent")
	}
	return b.Grant.validate("grant.")
}

// fingerprint identifies the payment's parameters: a retry with the same
// key must send the same ones.
func (b *paymentBody) fingerprint() (string, error) {
	g := b.Grant.template()
	v := struct {
		A string           `json:"a"`
		M money.Money      `json:"m"`
		P payment.Provider `json:"p"`
		I string           `json:"i"`
		D string           `json:"d"`
		G payment.Grant    `json:"g"`
	}{b.AgentID, *b.Amount, b.Provider, b.ProviderIntentID, b.Description, g}
	j, err := json.Marshal(v) // struct fields in a fixed order: deterministic
	if err != nil {
		return "", Invalid("grant", "cannot be encoded: "+err.Error())
	}
	sum := sha256.Sum256(j)
	return hex.EncodeToString(sum[:]), nil
}

func (s *Server) createPayment(c echo.Context) error {
	key, b, err := withBody[paymentBody](c, idempotencyKey, s.decode)
	if err != nil {
		return err
	}
	fingerprint, err := b.fingerprint()
	if err != nil {
		return err
	}
	now := s.now().UTC()
	if err := b.Grant.ahead("grant.", now); err != nil {
		// A retry of a payment created while its grant's instants were
		// still ahead answers that payment, as any retry with its key does.
		if p, ferr := s.store.FindPaymentByIdempotencyKey(storeCtx(c), key); ferr == nil && p.Fingerprint == fingerprint {
			return c.JSON(http.StatusOK, p)
		}
		return err
	}
	p := payment.Payment{
		ID:               uuid.NewString(),
		AgentID:          b.AgentID,
		Amount:           *b.Amount,
		Provider:         b.Provider,
		ProviderIntentID: b.ProviderIntentID,
		Description:      b.Description,
		Grant:            b.Grant.template(),
		IdempotencyKey:   key,
		Fingerprint:      fingerprint,
	}.Pending(now)
	if p.Provider == payment.ProviderStripe && p.ProviderIntentID == "" {
		return s.createIntentPayment(c, p)
	}
	res, err := s.store.CreatePayment(storeCtx(c), p)
	if errors.Is(err, store.ErrConflict) {
		// Either the key was used with other parameters (422) or the
		// payment clashes with another one, e.g. its providerIntentId (409).
		if _, ferr := s.store.FindPaymentByIdempotencyKey(storeCtx(c), key); ferr == nil {
			return &Error{Status: http.StatusUnprocessableEntity, Kind: problem.IdempotencyKeyReused,
				Detail: "this Idempotency-Key was already used for a payment with different parameters"}
		}
	}
	return answer(c, createdStatus(res.Created), res.Payment, err)
}

// completionBody is the answer of succeed and refund.
type completionBody struct {
	Payment      payment.Payment           `json:"payment"`
	Receipt      receipt.Signed            `json:"receipt"`
	Entitlements []entitlement.Entitlement `json:"entitlements"`
}

func completion(c store.Completion) completionBody {
	es := c.Entitlements
	if es == nil {
		es = []entitlement.Entitlement{}
	}
	return completionBody{Payment: c.Payment, Receipt: c.Receipt, Entitlements: es}
}

// emptyBody is the body of routes that take none; an empty JSON object is
// accepted too.
type emptyBody struct{}

// failBody is the optional body of POST /v1/payments/{id}/fail.
type failBody struct {
	Reason string `json:"reason"`
}

// Validate bounds the reason as payments store it.
func (b *failBody) Validate() error {
	if utf8.RuneCountInString(b.Reason) > payment.MaxFailureReasonLen {
		return Invalid("reason", fmt.Sprintf("must be at most %d characters", payment.MaxFailureReasonLen))
	}
	return nil
}

func (s *Server) change(c echo.Context) (string, store.PaymentChange, error) {
	id, err := pathParam(c, "id")
	if err != nil {
		return "", store.PaymentChange{}, err
	}
	if s.signer == nil {
		return "", store.PaymentChange{}, &Error{Status: http.StatusServiceUnavailable, Kind: problem.Unavailable,
			Detail: "receipt signing is not configured (no signing key)"}
	}
	var b emptyBody
	if err := s.decodeOptional(c, &b); err != nil {
		return "", store.PaymentChange{}, err
	}
	return id, store.PaymentChange{Issuer: s.issuer, Sign: s.signer.Sign}, nil
}

// settle is the handler of a payment change that signs a receipt (succeed:
// the store's CompletePayment; refund: RefundPayment): it answers the
// completion, or names verb when the payment's state refuses it.
func (s *Server) settle(verb string, op func(context.Context, string, store.PaymentChange) (store.Completion, error)) echo.HandlerFunc {
	return func(c echo.Context) error {
		id, ch, err := s.change(c)
		if err != nil {
			return err
		}
		res, err := op(storeCtx(c), id, ch)
		return answer(c, http.StatusOK, completion(res), paymentStateError(err, verb))
	}
}

func (s *Server) failPayment(c echo.Context) error {
	id, b, err := withBody[failBody](c, idParam, s.decodeOptional)
	if err != nil {
		return err
	}
	p, err := s.store.FailPayment(storeCtx(c), id, store.PaymentChange{Reason: payment.CleanFailureReason(b.Reason)})
	return answer(c, http.StatusOK, p, paymentStateError(err, "fail"))
}

// paymentStateError explains a Conflict from a state change.
func paymentStateError(err error, verb string) error {
	var se *store.Error
	if errors.As(err, &se) && se.Code == store.CodeConflict {
		return &Error{Status: http.StatusConflict, Kind: problem.Conflict,
			Detail: "cannot " + verb + " this payment in its current state: " + se.Message}
	}
	return err
}
