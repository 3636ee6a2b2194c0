package client

import (
	"context"
	"net/http"
	"time"
)

// PortalSessionRequest is the body of CreatePortalSession.
type PortalSessionRequest struct {
	AgentID string `json:"agentId"`
	// TTLSeconds is how long the session lasts: 0 for the server's default
	// (an hour), else 60 to 86400.
	TTLSeconds int64 `json:"ttlSeconds,omitempty"`
}

func (r PortalSessionRequest) check() error { return checkAgent("agentId", r.AgentID) }

// PortalSession is a portal session, as the API shows it (the fields of
// portal.Session, which this package does not import: package portal
// embeds the wallet's built page). Token and URL are set only in the
// answer that minted it: the token is stored hashed and never shown again.
type PortalSession struct {
	ID        string     `json:"id"`
	AgentID   string     `json:"agentId"`
	CreatedBy string     `json:"createdBy"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// Token is the session's bearer credential ("stp_portal_…").
	Token string `json:"token,omitempty"`
	// URL opens the portal page with the session: /portal?session=<token>.
	URL string `json:"url,omitempty"`
}

// CreatePortalSession mints a portal session for r.AgentID: a short-lived
// credential with which the agent's end user reads its balance, usage,
// consumptions and receipts, starts a Checkout top-up and edits its auto
// top-up, and nothing else (docs/portal.md). idempotencyKey is sent as the
// Idempotency-Key header (the route requires one); a retry with it answers
// the same session and token. Role: billing, admin.
func (c *Client) CreatePortalSession(ctx context.Context, idempotencyKey string, r PortalSessionRequest) (*PortalSession, error) {
	return fetch[PortalSession](ctx, c, call{method: http.MethodPost, path: "/v1/portal-sessions", body: r,
		idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// GetPortalSession reads a portal session (never its token). Role:
// billing, admin.
func (c *Client) GetPortalSession(ctx context.Context, id string) (*PortalSession, error) {
	return fetch[PortalSession](ctx, c, call{method: http.MethodGet, path: "/v1/portal-sessions/" + seg(id), retry: true})
}

// RevokePortalSession revokes a portal session: its token is refused from
// then on. Idempotent. Role: billing, admin.
func (c *Client) RevokePortalSession(ctx context.Context, id string) (*PortalSession, error) {
	return fetch[PortalSession](ctx, c, call{method: http.MethodPost, path: "/v1/portal-sessions/" + seg(id) + "/revoke", retry: true})
}
