// Package stripepay is Stipend's side of payments with Stripe: the Stripe
// objects Stipend makes for a payment (PaymentIntents and Checkout
// Sessions, through stripe-go), how the state of those objects, read from an
// event or from Stripe's API, moves the payment (Applier), and the
// reconciliation sweep that reads the payments still pending from Stripe so
// a lost webhook never loses a grant (Sweep).
package stripepay

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/stripe/stripe-go/v82"

	"github.com/stipend-mcp/stipend/payment"
)

// Config is how a Client reaches Stripe.
type Config struct {
	// SecretKey is the account's secret (sk_…) or restricted (rk_…) key.
	SecretKey string
	// URL is the API's base URL; empty is Stripe's (https://api.stripe.com).
	// Tests point it at stripe-mock.
	URL string
	// HTTPClient makes the requests; nil is stripe-go's default (80 s timeout).
	HTTPClient *http.Client
	// Issuer is the receipts' issuer of this deployment, written into the
	// metadata of every object made (payment.IssuerMetadataKey) so that an
	// Applier of another issuer ignores their events; empty writes none.
	Issuer string
	// MaxNetworkRetries is how often stripe-go retries a request that failed
	// on the network or with a 409/5xx (with the same idempotency key, so a
	// retried create makes one object); nil is stripe-go's default (2).
	MaxNetworkRetries *int64
}

// Client makes and reads the Stripe objects of Stipend's payments.
type Client struct {
	sc     *stripe.Client
	issuer string
}

// New returns a client of cfg; a missing secret key is an error.
func New(cfg Config) (*Client, error) {
	if strings.TrimSpace(cfg.SecretKey) == "" {
		return nil, errors.New("stripepay: a secret key is required")
	}
	bc := &stripe.BackendConfig{
		HTTPClient:        cfg.HTTPClient,
		MaxNetworkRetries: cfg.MaxNetworkRetries,
		// Failures reach the caller as errors; stripe-go's own log lines
		// would repeat them outside Stipend's structured log.
		LeveledLogger: &stripe.LeveledLogger{Level: stripe.LevelNull},
	}
	if cfg.URL != "" {
		bc.URL = stripe.String(strings.TrimRight(cfg.URL, "/"))
	}
	sc := stripe.NewClient(strings.TrimSpace(cfg.SecretKey), stripe.WithBackends(stripe.NewBackendsWithConfig(bc)))
	return &Client{sc: sc, issuer: cfg.Issuer}, nil
}

// metadata is the metadata of p's objects: its ID, and the issuer.
func (c *Client) metadata(p *payment.Payment) map[string]string {
	m := map[string]string{payment.MetadataKey: p.ID}
	if c.issuer != "" {
		m[payment.IssuerMetadataKey] = c.issuer
	}
	return m
}

// PaymentID returns the ID of the payment created with a Stipend
// idempotency key on a route that makes a Stripe object: derived from the
// key, so a retried request sends Stripe the same metadata, which Stripe's
// idempotency requires.
func PaymentID(key string) string {
	return uuid.NewSHA1(paymentNamespace, []byte(key)).String()
}

// paymentNamespace is the UUID namespace of PaymentID.
var paymentNamespace = uuid.MustParse("5f0a8f83-5b4c-4c8b-9d55-0c3c2b1e7a11")

// idempotencyKey is the Idempotency-Key sent to Stripe for the object of
// kind made for a Stipend idempotency key: a retried create makes one
// Stripe object, and the raw key never leaves Stipend.
func idempotencyKey(kind, key string) string {
	sum := sha256.Sum256([]byte(kind + "\x00" + key))
	return "stipend-" + kind + "-" + hex.EncodeToString(sum[:])
}

// CreatePaymentIntent makes the PaymentIntent of p (its amount, currency,
// description, and its ID in metadata), keyed by key, p's idempotency key.
// With automatic payment methods, the payer confirms it with its
// client_secret.
func (c *Client) CreatePaymentIntent(ctx context.Context, p *payment.Payment, key string) (*stripe.PaymentIntent, error) {
	params := &stripe.PaymentIntentCreateParams{
		Amount:                  stripe.Int64(p.Amount.Cents),
		Currency:                stripe.String(strings.ToLower(p.Amount.Currency)),
		Metadata:                c.metadata(p),
		AutomaticPaymentMethods: &stripe.PaymentIntentCreateAutomaticPaymentMethodsParams{Enabled: stripe.Bool(true)},
	}
	if p.Description != "" {
		params.Description = stripe.String(p.Description)
	}
	params.SetIdempotencyKey(idempotencyKey("pi", key))
	return c.sc.V1PaymentIntents.Create(ctx, params)
}

// CheckoutRequest is what a Checkout Session needs besides its payment.
type CheckoutRequest struct {
	SuccessURL, CancelURL string
	// CustomerEmail, if set, prefills the payer's email.
	CustomerEmail string
	// ProductName is the line item's name; empty is p's description, or
	// "Credits".
	ProductName string
	// SaveForTopUp makes the session create a Stripe customer and save the
	// payment method for off-session charges (setup_future_usage
	// off_session): its success saves them for auto top-up.
	SaveForTopUp bool
}

// CreateCheckoutSession makes the Checkout Session (mode payment, one line
// item of p's amount) that pays p: p's ID is its client_reference_id and in
// the metadata of the session and of its PaymentIntent. Keyed by key, p's
// idempotency key.
func (c *Client) CreateCheckoutSession(ctx context.Context, p *payment.Payment, r CheckoutRequest, key string) (*stripe.CheckoutSession, error) {
	name := r.ProductName
	if name == "" {
		name = p.Description
	}
	if name == "" {
		name = "Credits"
	}
	meta := c.metadata(p)
	params := &stripe.CheckoutSessionCreateParams{
		Mode:              stripe.String(string(stripe.CheckoutSessionModePayment)),
		SuccessURL:        stripe.String(r.SuccessURL),
		ClientReferenceID: stripe.String(p.ID),
		Metadata:          meta,
		PaymentIntentData: &stripe.CheckoutSessionCreatePaymentIntentDataParams{Metadata: meta},
		LineItems: []*stripe.CheckoutSessionCreateLineItemParams{{
			Quantity: stripe.Int64(1),
			PriceData: &stripe.CheckoutSessionCreateLineItemPriceDataParams{
				Currency:    stripe.String(strings.ToLower(p.Amount.Currency)),
				UnitAmount:  stripe.Int64(p.Amount.Cents),
				ProductData: &stripe.CheckoutSessionCreateLineItemPriceDataProductDataParams{Name: stripe.String(name)},
			},
		}},
	}
	if r.CancelURL != "" {
		params.CancelURL = stripe.String(r.CancelURL)
	}
	if r.CustomerEmail != "" {
		params.CustomerEmail = stripe.String(r.CustomerEmail)
	}
	if r.SaveForTopUp {
		params.CustomerCreation = stripe.String(string(stripe.CheckoutSessionCustomerCreationAlways))
		params.PaymentIntentData.SetupFutureUsage = stripe.String(string(stripe.PaymentIntentSetupFutureUsageOffSession))
	}
	params.SetIdempotencyKey(idempotencyKey("cs", key))
	return c.sc.V1CheckoutSessions.Create(ctx, params)
}

// PaymentIntent reads the PaymentIntent id from Stripe.
func (c *Client) PaymentIntent(ctx context.Context, id string) (*stripe.PaymentIntent, error) {
	return c.sc.V1PaymentIntents.Retrieve(ctx, id, nil)
}

// CheckoutSession reads the Checkout Session id from Stripe.
func (c *Client) CheckoutSession(ctx context.Context, id string) (*stripe.CheckoutSession, error) {
	return c.sc.V1CheckoutSessions.Retrieve(ctx, id, nil)
}
