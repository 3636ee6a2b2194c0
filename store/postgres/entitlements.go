package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// ListEntitlements implements store.EntitlementStore.
func (s *Store) ListEntitlements(ctx context.Context, agentID string, f store.EntitlementFilter, p store.Page) ([]entitlement.Entitlement, string, error) {
	q := listQuery{
		name:  "entitlements",
		from:  `SELECT ` + entitlementColumns + ` FROM entitlements WHERE agent_id = $1`,
		args:  []any{agentID},
		order: "created_at",
		parts: []string{agentID, string(f.Status), string(f.Type), f.Service},
	}
	if f.Status != "" {
		q.where("status", "=", string(f.Status))
	}
	if f.Type != "" {
		q.where("type", "=", string(f.Type))
	}
	if f.Service != "" {
		q.where("scope_service", "= ANY", []string{f.Service, entitlement.AnyService})
	}
	now := s.clock()
	return list(ctx, s.pool, q, p, func(r pgx.Row) (entitlement.Entitlement, error) {
		e, err := scanEntitlement(r)
		e.Refresh(now)
		return e, err
	}, func(e *entitlement.Entitlement) (time.Time, string) { return e.CreatedAt, e.ID })
}

// readEntitlement reads the entitlement id on q, locking its row with lock
// (" FOR UPDATE" until the transaction ends): ErrNotFound if absent.
func readEntitlement(ctx context.Context, q querier, id, lock string) (entitlement.Entitlement, error) {
	e, err := scanEntitlement(q.QueryRow(ctx, `SELECT `+entitlementColumns+` FROM entitlements WHERE id = $1`+lock, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return entitlement.Entitlement{}, store.Errorf(store.CodeNotFound, "entitlement %q", id)
	}
	return e, err
}

// endHolds marks the open holds ids ended with status at now.
func endHolds(ctx context.Context, tx pgx.Tx, ids []string, status entitlement.HoldStatus, now time.Time) error {
	if len(ids) == 0 {
		return nil
	}
	_, err := tx.Exec(ctx, endHoldsSQL, ids, string(status), now)
	return err
}

// updateEntitlement writes e's mutable state inside tx.
func updateEntitlement(ctx context.Context, tx pgx.Tx, e *entitlement.Entitlement) error {
	args, err := updateEntitlementArgs(e)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, updateEntitlementSQL, args...)
	return err
}
