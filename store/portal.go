package store

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/portal"
)

// PortalSessions keeps portal sessions (package portal): the end user's
// short-lived, single-agent credential. A session is stored with the
// SHA-256 of its token, never the token. Every method is atomic.
type PortalSessions interface {
	// CreatePortalSession stores s, which must pass s.Validate (Invalid
	// otherwise) and carry a new ID (Conflict if it exists). The account
	// need not exist. It honours a fence in ctx (see store.Fence):
	// POST /v1/portal-sessions is a ledger route.
	CreatePortalSession(ctx context.Context, s portal.Session) (portal.Session, error)
	// GetPortalSession returns the session, revoked and expired ones
	// included, or ErrNotFound.
	GetPortalSession(ctx context.Context, id string) (portal.Session, error)
	// RevokePortalSession sets the session's RevokedAt to at. Revoking a
	// revoked session returns it unchanged (the first RevokedAt stays).
	// ErrNotFound if absent.
	RevokePortalSession(ctx context.Context, id string, at time.Time) (portal.Session, error)
}

// NewPortalSession returns what CreatePortalSession stores of s: s checked
// (Invalid when s.Validate fails), its instants in UTC at the microsecond
// precision every backend keeps, and not revoked.
func NewPortalSession(s portal.Session) (portal.Session, error) {
	if err := s.Validate(); err != nil {
		return portal.Session{}, Wrap(CodeInvalid, err, "portal session")
	}
	s.CreatedAt = s.CreatedAt.UTC().Truncate(time.Microsecond)
	s.ExpiresAt = s.ExpiresAt.UTC().Truncate(time.Microsecond)
	s.RevokedAt = nil
	return s, nil
}
