package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/store"
)

// colPortalSessions holds portal sessions by ID: the token's SHA-256, never
// the token. Expired sessions stay until deleted; a TTL policy on
// expiresAt may delete them (docs/portal.md).
const colPortalSessions = "portal_sessions"

func portalFields(ps *portal.Session) []field {
	return []field{
		str("id", &ps.ID), str("agentId", &ps.AgentID), str("tokenSha256", &ps.TokenSHA256), str("createdBy", &ps.CreatedBy),
		instant("createdAt", &ps.CreatedAt), instant("expiresAt", &ps.ExpiresAt), ptr("revokedAt", &ps.RevokedAt, instant),
	}
}

var portalFrom = decoder(portalFields)

func (s *Store) portalSession(src source, id string) (portal.Session, error) {
	return load(src, s.doc(colPortalSessions, id), portalFrom, store.Errorf(store.CodeNotFound, "portal session %q", id))
}

// CreatePortalSession implements store.PortalSessions.
func (s *Store) CreatePortalSession(ctx context.Context, ps portal.Session) (portal.Session, error) {
	ps, err := store.NewPortalSession(ps)
	if err != nil {
		return portal.Session{}, err
	}
	ref := s.doc(colPortalSessions, ps.ID)
	err = s.run(ctx, "create portal session", func(ctx context.Context, tx *firestore.Transaction) error {
		fd, err := s.readFence(ctx, tx)
		if err != nil {
			return err
		}
		if _, err := tx.Get(ref); err == nil {
			return store.Errorf(store.CodeConflict, "portal session %q exists", ps.ID)
		} else if !isNotFound(err) {
			return err
		}
		if err := fd.mark(tx, s.clock()); err != nil {
			return err
		}
		return tx.Create(ref, encode(portalFields(&ps)))
	})
	if err != nil {
		return portal.Session{}, err
	}
	return ps, nil
}

// GetPortalSession implements store.PortalSessions.
func (s *Store) GetPortalSession(ctx context.Context, id string) (portal.Session, error) {
	return s.portalSession(direct{ctx, "get portal session"}, id)
}

// RevokePortalSession implements store.PortalSessions.
func (s *Store) RevokePortalSession(ctx context.Context, id string, at time.Time) (portal.Session, error) {
	ref := s.doc(colPortalSessions, id)
	var out portal.Session
	err := s.run(ctx, "revoke portal session", func(ctx context.Context, ftx *firestore.Transaction) error {
		var err error
		if out, err = s.portalSession(&tx{tx: ftx}, id); err != nil || out.RevokedAt != nil {
			return err
		}
		when := stamp(at)
		out.RevokedAt = &when
		return ftx.Update(ref, []firestore.Update{{Path: "revokedAt", Value: when}})
	})
	if err != nil {
		return portal.Session{}, err
	}
	return out, nil
}
