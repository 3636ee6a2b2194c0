package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/store"
)

// Portal sessions are rows of portal_sessions (migration 00006).

const portalColumns = `id, agent_id, token_sha256, created_by, created_at, expires_at, revoked_at`

func scanPortal(row pgx.Row) (portal.Session, error) {
	var ps portal.Session
	err := row.Scan(&ps.ID, &ps.AgentID, &ps.TokenSHA256, &ps.CreatedBy, &ps.CreatedAt, &ps.ExpiresAt, &ps.RevokedAt)
	ps.CreatedAt, ps.ExpiresAt = ps.CreatedAt.UTC(), ps.ExpiresAt.UTC()
	if ps.RevokedAt != nil {
		t := ps.RevokedAt.UTC()
		ps.RevokedAt = &t
	}
	return ps, err
}

func portalNotFound(id string) error {
	return store.Errorf(store.CodeNotFound, "portal session %q", id)
}

// CreatePortalSession implements store.PortalSessions.
func (s *Store) CreatePortalSession(ctx context.Context, ps portal.Session) (portal.Session, error) {
	ps, err := store.NewPortalSession(ps)
	if err != nil {
		return portal.Session{}, err
	}
	// A transaction, so that a fence is checked with the insert.
	err = s.run(ctx, "create portal session", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO portal_sessions (`+portalColumns+`)
			VALUES ($1, $2, $3, $4, $5, $6, NULL) ON CONFLICT (id) DO NOTHING`,
			ps.ID, ps.AgentID, ps.TokenSHA256, ps.CreatedBy, ps.CreatedAt, ps.ExpiresAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return store.Errorf(store.CodeConflict, "portal session %q exists", ps.ID)
		}
		return s.markFence(ctx, tx, s.clock())
	})
	if err != nil {
		return portal.Session{}, err
	}
	return ps, nil
}

// GetPortalSession implements store.PortalSessions.
func (s *Store) GetPortalSession(ctx context.Context, id string) (portal.Session, error) {
	ps, err := one(ctx, s.pool, scanPortal, portalNotFound(id), `SELECT `+portalColumns+` FROM portal_sessions WHERE id = $1`, id)
	return ps, pgfault.Read(err, "get portal session")
}

// RevokePortalSession implements store.PortalSessions. One statement: the
// first revocation's instant stays.
func (s *Store) RevokePortalSession(ctx context.Context, id string, at time.Time) (portal.Session, error) {
	ps, err := one(ctx, s.pool, scanPortal, portalNotFound(id), `UPDATE portal_sessions SET revoked_at = COALESCE(revoked_at, $2)
		WHERE id = $1 RETURNING `+portalColumns, id, stamp(at))
	return ps, pgfault.Write(err, "revoke portal session")
}
