package client

import (
	"context"
	"net/http"

	"github.com/stipend-mcp/stipend/topup"
)

// PutTopUp sets the auto top-up of agentID and enables it: when the
// account's available credits in s.Amount's currency fall below
// s.Threshold, Stipend charges s.Amount off session (at most s.DailyCap a
// UTC day) and grants it as credits on s.Scope. The payer must have paid
// once through a Checkout Session made with SaveForTopUp (a 409 conflict
// otherwise). Idempotent. Role: billing, admin.
func (c *Client) PutTopUp(ctx context.Context, agentID string, s topup.Settings) (*topup.TopUp, error) {
	return fetch[topup.TopUp](ctx, c, call{method: http.MethodPut, path: "/v1/accounts/" + seg(agentID) + "/topup", body: s, retry: true})
}

// GetTopUp returns the auto top-up of agentID: its settings, saved method
// and state. Role: billing, admin.
func (c *Client) GetTopUp(ctx context.Context, agentID string) (*topup.TopUp, error) {
	return fetch[topup.TopUp](ctx, c, call{method: http.MethodGet, path: "/v1/accounts/" + seg(agentID) + "/topup", retry: true})
}

// DisableTopUp disables the auto top-up of agentID, keeping its settings
// (PutTopUp enables it again). Idempotent. Role: billing, admin.
func (c *Client) DisableTopUp(ctx context.Context, agentID string) (*topup.TopUp, error) {
	return fetch[topup.TopUp](ctx, c, call{method: http.MethodDelete, path: "/v1/accounts/" + seg(agentID) + "/topup", retry: true})
}
