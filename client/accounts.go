package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// List is one page of a list answer; NextCursor is empty on the last page.
type List[T any] struct {
	Items      []T    `json:"items"`
	NextCursor string `json:"nextCursor,omitempty"`
}

// Page asks for one page: Limit ≤ 0 leaves the server's default.
type Page struct {
	Limit  int
	Cursor string
}

func (p Page) values() url.Values {
	v := url.Values{}
	if p.Limit > 0 {
		v.Set("limit", strconv.Itoa(p.Limit))
	}
	if p.Cursor != "" {
		v.Set("cursor", p.Cursor)
	}
	return v
}

// AccountUpdate is the body of PUT /v1/accounts/{agentId}. Kind is set
// when the account is made (empty: an agent; entitlement.KindWallet: a
// wallet, see wallets.go) and never changes: empty keeps the stored kind,
// another is a 409 (IsConflict) naming kind.
type AccountUpdate struct {
	Kind        entitlement.AccountKind `json:"kind,omitempty"`
	DisplayName string                  `json:"displayName,omitempty"`
	Metadata    map[string]string       `json:"metadata,omitempty"`
}

// PutAccount creates or updates an account, an agent's or a wallet's
// (idempotent). Role: billing, admin.
func (c *Client) PutAccount(ctx context.Context, agentID string, u AccountUpdate) (*entitlement.Account, error) {
	return fetch[entitlement.Account](ctx, c, call{method: http.MethodPut, path: "/v1/accounts/" + seg(agentID), body: u, retry: true})
}

// GetAccount returns an agent's account. Role: billing, admin, reader (own).
func (c *Client) GetAccount(ctx context.Context, agentID string) (*entitlement.Account, error) {
	return fetch[entitlement.Account](ctx, c, call{method: http.MethodGet, path: "/v1/accounts/" + seg(agentID), retry: true})
}

// EntitlementFilter narrows ListEntitlements; zero fields do not filter.
type EntitlementFilter struct {
	Status  entitlement.Status
	Service string
	Type    entitlement.Type
}

// ListEntitlements returns one page of an agent's entitlements. Role:
// billing, admin, reader (own).
func (c *Client) ListEntitlements(ctx context.Context, agentID string, f EntitlementFilter, p Page) (*List[entitlement.Entitlement], error) {
	q := p.values()
	for k, v := range map[string]string{"status": string(f.Status), "service": f.Service, "type": string(f.Type)} {
		if v != "" {
			q.Set(k, v)
		}
	}
	path := "/v1/accounts/" + seg(agentID) + "/entitlements"
	return fetch[List[entitlement.Entitlement]](ctx, c, call{method: http.MethodGet, path: path, query: q, retry: true})
}

// GetEntitlement returns one entitlement. Role: billing, admin, reader (own).
func (c *Client) GetEntitlement(ctx context.Context, id string) (*entitlement.Entitlement, error) {
	return fetch[entitlement.Entitlement](ctx, c, call{method: http.MethodGet, path: "/v1/entitlements/" + seg(id), retry: true})
}

// EntitlementGrant is the body of a direct grant: a payment grant template
// plus, for credits, the balance to put in, and spend controls and
// low-balance alerts (limits.go).
type EntitlementGrant struct {
	payment.Grant
	Balance  *money.Money      `json:"balance,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	Limits   *Limits           `json:"limits,omitempty"`
	Alerts   []Threshold       `json:"alerts,omitempty"`
}

// GrantEntitlement grants an entitlement to an agent directly, without a
// payment. idempotencyKey is sent as the Idempotency-Key header (the route
// requires one; without it the call is refused unsent) and makes the call
// safe to retry; it must be unique per grant. Role: admin.
func (c *Client) GrantEntitlement(ctx context.Context, agentID, idempotencyKey string, g EntitlementGrant) (*entitlement.Entitlement, error) {
	path := "/v1/accounts/" + seg(agentID) + "/entitlements"
	return fetch[entitlement.Entitlement](ctx, c, call{method: http.MethodPost, path: path, body: g, idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// RevokeEntitlement revokes an entitlement (idempotent). Role: admin.
func (c *Client) RevokeEntitlement(ctx context.Context, id string) (*entitlement.Entitlement, error) {
	path := "/v1/entitlements/" + seg(id) + "/revoke"
	return fetch[entitlement.Entitlement](ctx, c, call{method: http.MethodPost, path: path, retry: true})
}

// ListConsumptions returns one page of an agent's consumptions, newest or
// oldest first as the server orders them, optionally only those since a time.
// Role: billing, admin, reader (own).
func (c *Client) ListConsumptions(ctx context.Context, agentID string, since time.Time, p Page) (*List[entitlement.Consumption], error) {
	q := p.values()
	if !since.IsZero() {
		q.Set("since", since.UTC().Format(time.RFC3339Nano))
	}
	path := "/v1/accounts/" + seg(agentID) + "/consumptions"
	return fetch[List[entitlement.Consumption]](ctx, c, call{method: http.MethodGet, path: path, query: q, retry: true})
}
