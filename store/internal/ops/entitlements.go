package ops

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// This file holds the changes of one entitlement off the hot path: its
// grant, its revocation and the update of its controls.

// CreateEntitlement is store.EntitlementStore.CreateEntitlement.
func (o Shared) CreateEntitlement(ctx context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error) {
	if err := e.Validate(); err != nil {
		return entitlement.Entitlement{}, store.Wrap(store.CodeInvalid, err, "entitlement")
	}
	var out entitlement.Entitlement
	err := o.run(ctx, "create entitlement", func(tx unit.Tx) error {
		if _, err := tx.Entitlement(e.ID); !errors.Is(err, store.ErrNotFound) {
			return found(err, store.CodeConflict, "entitlement %q exists", e.ID)
		}
		if err := tx.EnsureAccount(e.AgentID); err != nil {
			return err
		}
		now := tx.Now()
		out = tx.Normalize(e)
		if err := addEvents(tx, now, ev(event.EntitlementGranted, out.AgentID, &out)); err != nil {
			return err
		}
		if err := tx.Fence(); err != nil {
			return err
		}
		tx.CreateEntitlement(out.Clone())
		return nil
	})
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	return out, nil
}

// changeEntitlement runs change on the entitlement id, read for a change
// of it, at the unit's now, and answers it as change left it, shown now.
func (o Shared) changeEntitlement(ctx context.Context, what, id string, change func(tx unit.Tx, e *entitlement.Entitlement, now time.Time) error) (out entitlement.Entitlement, err error) {
	err = o.run(ctx, what, func(tx unit.Tx) error {
		e, err := tx.Entitlement(id)
		if err != nil {
			return err
		}
		now := tx.Now()
		if err := change(tx, &e, now); err != nil {
			return err
		}
		out = e
		out.Refresh(now)
		return nil
	})
	return out, err
}

// RevokeEntitlement is store.EntitlementStore.RevokeEntitlement.
func (o Shared) RevokeEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error) {
	return o.changeEntitlement(ctx, "revoke entitlement", id, func(tx unit.Tx, e *entitlement.Entitlement, now time.Time) error {
		es := []entitlement.Entitlement{*e}
		evs, err := revoke(tx, es, now)
		if err != nil {
			return err
		}
		*e = es[0]
		return addEvents(tx, now, evs...)
	})
}

// UpdateEntitlement is store.EntitlementUpdater.UpdateEntitlement
// (entitlement.Entitlement.Apply has the rules).
func (o Shared) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	return o.changeEntitlement(ctx, "update entitlement", id, func(tx unit.Tx, e *entitlement.Entitlement, now time.Time) error {
		expired := e.ExpireHolds(now)
		if err := e.Apply(u, now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "update of entitlement %q", id)
		}
		*e = tx.Normalize(*e)
		tx.UpdateEntitlement(e.Clone(), expired, nil)
		return nil
	})
}
