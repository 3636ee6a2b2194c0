package api

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/stripepay"
)

// registerStripe routes what Stipend's own Stripe objects add: Checkout
// Sessions, and finding a payment by its PaymentIntent.
func (s *Server) registerStripe(g group) {
	billing := s.auth(apikey.RoleBilling)
	g.POST("/checkout-sessions", s.createCheckout, billing)
	g.GET("/payments", s.findPayments, billing)
}

// checkoutBody is the body of POST /v1/checkout-sessions.
type checkoutBody struct {
	AgentID       string       `json:"agentId" validate:"required,name"`
	Amount        *money.Money `json:"amount" validate:"required"`
	Description   string       `json:"description" validate:"max=1000"`
	Grant         *grantBody   `json:"grant" validate:"required"`
	SuccessURL    string       `json:"successUrl" validate:"required"`
	CancelURL     string       `json:"cancelUrl"`
	CustomerEmail string       `json:"customerEmail" validate:"omitempty,max=512,email"`
	// SaveForTopUp saves the payer's Stripe customer and payment method
	// for the agent's auto top-up (api/topup.go).
	SaveForTopUp bool `json:"saveForTopUp"`
}

// Validate checks the rules across fields and what Stripe is known to refuse.
func (b *checkoutBody) Validate() error {
	if b.Amount.Cents <= 0 {
		return Invalid("amount.cents", "must be positive")
	}
	if err := stripepay.CheckAmount(*b.Amount); err != nil {
		return fieldErrorOf(err)
	}
	if err := stripepay.CheckURL("successUrl", b.SuccessURL); err != nil {
		return fieldErrorOf(err)
	}
	if b.CancelURL != "" {
		if err := stripepay.CheckURL("cancelUrl", b.CancelURL); err != nil {
			return fieldErrorOf(err)
		}
	}
	return b.Grant.validate("grant.")
}

// fingerprint identifies the checkout's parameters: a retry with the same
// key must send the same ones.
func (b *checkoutBody) fingerprint() (string, error) {
	v := struct {
		A string        `json:"a"`
		M money.Money   `json:"m"`
		D string        `json:"d"`
		G payment.Grant `json:"g"`
		S string        `json:"s"`
		C string        `json:"c"`
		E string        `json:"e"`
		T bool          `json:"t,omitempty"` // absent when false: earlier fingerprints stay valid
	}{b.AgentID, *b.Amount, b.Description, b.Grant.template(), b.SuccessURL, b.CancelURL, b.CustomerEmail, b.SaveForTopUp}
	j, err := json.Marshal(v) // struct fields in a fixed order: deterministic
	if err != nil {
		return "", Invalid("grant", "cannot be encoded: "+err.Error())
	}
	sum := sha256.Sum256(append([]byte("checkout\x00"), j...))
	return hex.EncodeToString(sum[:]), nil
}

// checkoutAnswer is the answer of POST /v1/checkout-sessions: the pending
// payment, and where and until when its payer pays.
type checkoutAnswer struct {
	Payment   payment.Payment `json:"payment"`
	SessionID string          `json:"sessionId"`
	URL       string          `json:"url"`
	ExpiresAt time.Time       `json:"expiresAt"`
}

func answerCheckout(c echo.Context, status int, p payment.Payment) error {
	co := p.Checkout
	if co == nil {
		// A payment made with this key by POST /v1/payments: its
		// fingerprint never matches a checkout's, so this is unreachable.
		return Invalid("", "this Idempotency-Key names a payment without a Checkout Session")
	}
	return c.JSON(status, checkoutAnswer{Payment: p, SessionID: co.SessionID, URL: co.URL, ExpiresAt: co.ExpiresAt})
}

// createCheckout is POST /v1/checkout-sessions: a Stripe Checkout Session
// (mode payment) and the pending payment it pays, linked to it. See
// stripe.go for the order of the calls.
func (s *Server) createCheckout(c echo.Context) error {
	key, b, err := withBody[checkoutBody](c, idempotencyKey, s.decode)
	if err != nil {
		return err
	}
	return s.startCheckout(c, key, b)
}

// startCheckout makes the Checkout Session and pending payment of b, keyed
// by key (POST /v1/checkout-sessions, and the portal's top-up).
func (s *Server) startCheckout(c echo.Context, key string, b *checkoutBody) error {
	fingerprint, err := b.fingerprint()
	if err != nil {
		return err
	}
	if err := s.needStripe(""); err != nil {
		return err
	}
	ctx := storeCtx(c)
	prior, ok, err := s.earlier(ctx, key, fingerprint)
	if err != nil {
		return err
	}
	if ok {
		return answerCheckout(c, http.StatusOK, prior)
	}
	now := s.now().UTC()
	if err := b.Grant.ahead("grant.", now); err != nil {
		return err
	}
	p := payment.Payment{
		ID:             stripepay.PaymentID(key),
		AgentID:        b.AgentID,
		Amount:         *b.Amount,
		Provider:       payment.ProviderStripe,
		Description:    b.Description,
		Grant:          b.Grant.template(),
		IdempotencyKey: key,
		Fingerprint:    fingerprint,
	}.Pending(now)
	cs, err := s.stripe.CreateCheckoutSession(ctx, &p, stripepay.CheckoutRequest{
		SuccessURL: b.SuccessURL, CancelURL: b.CancelURL, CustomerEmail: b.CustomerEmail,
		SaveForTopUp: b.SaveForTopUp,
	}, key)
	if err != nil {
		return stripeProblem(err)
	}
	p.Checkout = &payment.Checkout{SessionID: cs.ID, URL: cs.URL, ExpiresAt: time.Unix(cs.ExpiresAt, 0).UTC()}
	res, err := s.createLinked(ctx, p)
	if err != nil {
		return err
	}
	return answerCheckout(c, createdStatus(res.Created), res.Payment)
}
