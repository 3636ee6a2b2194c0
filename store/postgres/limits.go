package postgres

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// UpdateEntitlement implements store.EntitlementUpdater: the change is
// made under the entitlement's row lock, as every charge is.
func (s *Store) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	var out entitlement.Entitlement
	err := s.run(ctx, "update entitlement", func(tx pgx.Tx) error {
		now := s.clock()
		e, err := lockEntitlement(ctx, tx, id)
		if err != nil {
			return err
		}
		if err := e.Apply(u, now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "update of entitlement %q", id)
		}
		if e.ExpiresAt != nil {
			t := stamp(*e.ExpiresAt)
			e.ExpiresAt = &t
		}
		if err := updateEntitlement(ctx, tx, &e); err != nil {
			return err
		}
		out = e
		return nil
	})
	return out, err
}
