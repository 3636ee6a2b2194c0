package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/store"
)

// colPortalSessions holds portal sessions by ID: the token's SHA-256, never
// the token. Expired sessions stay until deleted; a TTL policy on
// expiresAt may delete them (docs/portal.md).
const colPortalSessions = "portal_sessions"

func (s *Store) portalRef(id string) *firestore.DocumentRef {
	return s.col(colPortalSessions).Doc(docID(id))
}

func portalFields(ps *portal.Session) []field {
	return []field{
		str("id", &ps.ID), str("agentId", &ps.AgentID), str("tokenSha256", &ps.TokenSHA256), str("createdBy", &ps.CreatedBy),
		instant("createdAt", &ps.CreatedAt), instant("expiresAt", &ps.ExpiresAt), ptr("revokedAt", &ps.RevokedAt, instant),
	}
}

func portalFrom(snap *firestore.DocumentSnapshot) (portal.Session, error) {
	return decodeSnap(snap, portalFields)
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
	ref := s.portalRef(ps.ID)
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
	snap, err := s.portalRef(id).Get(ctx)
	if isNotFound(err) {
		return portal.Session{}, portalNotFound(id)
	}
	if err != nil {
		return portal.Session{}, fsfault.Read(err, "get portal session")
	}
	return portalFrom(snap)
}

// RevokePortalSession implements store.PortalSessions.
func (s *Store) RevokePortalSession(ctx context.Context, id string, at time.Time) (portal.Session, error) {
	ref := s.portalRef(id)
	var out portal.Session
	err := s.run(ctx, "revoke portal session", func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if isNotFound(err) {
			return portalNotFound(id)
		}
		if err != nil {
			return err
		}
		if out, err = portalFrom(snap); err != nil {
			return err
		}
		if out.RevokedAt != nil {
			return nil
		}
		when := stamp(at)
		out.RevokedAt = &when
		return tx.Update(ref, []firestore.Update{{Path: "revokedAt", Value: when}})
	})
	if err != nil {
		return portal.Session{}, err
	}
	return out, nil
}
