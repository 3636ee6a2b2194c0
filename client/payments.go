package client

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
)

// PaymentRequest is the body of POST /v1/payments.
type PaymentRequest struct {
	AgentID          string           `json:"agentId"`
	Amount           money.Money      `json:"amount"`
	Provider         payment.Provider `json:"provider"`
	ProviderIntentID string           `json:"providerIntentId,omitempty"`
	Description      string           `json:"description,omitempty"`
	Grant            payment.Grant    `json:"grant"`
}

// CreatePayment creates a pending payment, idempotently on idempotencyKey
// (sent as the Idempotency-Key header): the same key and body answer the
// existing payment with created false; the same key with another body is
// refused (IsKeyReused). Retried on network errors and 503. Role: billing, admin.
func (c *Client) CreatePayment(ctx context.Context, idempotencyKey string, r PaymentRequest) (p *payment.Payment, created bool, err error) {
	return create[payment.Payment](ctx, c, call{method: http.MethodPost, path: "/v1/payments", body: r, idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// GetPayment returns a payment. Role: billing, admin.
func (c *Client) GetPayment(ctx context.Context, id string) (*payment.Payment, error) {
	return fetch[payment.Payment](ctx, c, call{method: http.MethodGet, path: "/v1/payments/" + seg(id), retry: true})
}

// Completion is the answer to completing a payment: the payment, its signed
// receipt and the entitlements it granted.
type Completion struct {
	Payment      payment.Payment           `json:"payment"`
	Receipt      receipt.Signed            `json:"receipt"`
	Entitlements []entitlement.Entitlement `json:"entitlements"`
}

// SucceedPayment marks a payment succeeded: in one transaction it grants the
// entitlement, signs the receipt and enqueues the event. Completing twice
// answers the same receipt and grants nothing more, so it is retried.
// Role: billing, admin.
func (c *Client) SucceedPayment(ctx context.Context, id string) (*Completion, error) {
	path := "/v1/payments/" + seg(id) + "/succeed"
	return fetch[Completion](ctx, c, call{method: http.MethodPost, path: path, retry: true})
}

// RefundPayment refunds a succeeded payment: what is left of its grant is
// revoked and a refund receipt is signed. Refunding twice answers the same
// receipt, so it is retried. Role: billing, admin.
func (c *Client) RefundPayment(ctx context.Context, id string) (*Completion, error) {
	path := "/v1/payments/" + seg(id) + "/refund"
	// The served route requires an Idempotency-Key (docs/idempotency.md); one
	// fresh key per call, reused by its retries.
	key := "refund-" + uuid.NewString()
	return fetch[Completion](ctx, c, call{method: http.MethodPost, path: path, idemKey: key, retry: true})
}

// FailPayment marks a pending payment failed, with an optional reason.
// Role: billing, admin.
func (c *Client) FailPayment(ctx context.Context, id, reason string) (*payment.Payment, error) {
	body := reasonBody{reason}
	path := "/v1/payments/" + seg(id) + "/fail"
	return fetch[payment.Payment](ctx, c, call{method: http.MethodPost, path: path, body: body, retry: true})
}

// GetReceipt returns a signed receipt. Role: billing, admin, reader (own).
func (c *Client) GetReceipt(ctx context.Context, id string) (*receipt.Signed, error) {
	return fetch[receipt.Signed](ctx, c, call{method: http.MethodGet, path: "/v1/receipts/" + seg(id), retry: true})
}

// ListReceipts returns one page of an agent's receipts. Role: billing, admin, reader (own).
func (c *Client) ListReceipts(ctx context.Context, agentID string, p Page) (*List[receipt.Signed], error) {
	path := "/v1/accounts/" + seg(agentID) + "/receipts"
	return fetch[List[receipt.Signed]](ctx, c, call{method: http.MethodGet, path: path, query: p.values(), retry: true})
}

// JWKS returns the public keys that verify Stipend's receipts (GET
// /.well-known/jwks.json, no key needed), for receipt.Verify:
//
//	set, err := c.JWKS(ctx)
//	r, err := receipt.Verify(signed.JWS, set)
//
// Fetch it again when a receipt names a kid the set does not have: the
// server may have rotated its signing key.
func (c *Client) JWKS(ctx context.Context) (receipt.JWKS, error) {
	var raw json.RawMessage
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/.well-known/jwks.json", retry: true}, &raw); err != nil {
		return receipt.JWKS{}, err
	}
	set, err := receipt.ParseJWKS(raw)
	if err != nil {
		return receipt.JWKS{}, fmt.Errorf("client: decoding the answer to GET /.well-known/jwks.json: %w", err)
	}
	return set, nil
}
