package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// UpdateEntitlement implements store.EntitlementUpdater: one transaction
// on the entitlement's document, as RevokeEntitlement's, so it is ordered
// with the batches that charge it.
func (s *Store) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	ref := s.entitlementRef(id)
	var out entitlement.Entitlement
	err := s.run(ctx, "update entitlement", func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		if isNotFound(err) {
			return store.Errorf(store.CodeNotFound, "entitlement %q", id)
		} else if err != nil {
			return err
		}
		now := s.clock() // after the read: see instantAfterReads
		if out, err = entitlementFrom(snap); err != nil {
			return err
		}
		if err := out.Apply(u, now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "update of entitlement %q", id)
		}
		out.ExpiresAt = stampPtr(out.ExpiresAt)
		stampControls(&out)
		return tx.Set(ref, entitlementDoc(&out))
	})
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	out.Refresh(s.clock())
	return out, nil
}
