package ops

import (
	"context"
	"errors"

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
		switch _, err := tx.Entitlement(e.ID); {
		case err == nil:
			return store.Errorf(store.CodeConflict, "entitlement %q exists", e.ID)
		case !errors.Is(err, store.ErrNotFound):
			return err
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

// RevokeEntitlement is store.EntitlementStore.RevokeEntitlement.
func (o Shared) RevokeEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error) {
	var out entitlement.Entitlement
	err := o.run(ctx, "revoke entitlement", func(tx unit.Tx) error {
		e, err := tx.Entitlement(id)
		if err != nil {
			return err
		}
		now := tx.Now()
		es := []entitlement.Entitlement{e}
		evs := revoke(tx, es, now)
		out = es[0]
		out.Refresh(now)
		return addEvents(tx, now, evs...)
	})
	return out, err
}

// UpdateEntitlement is store.EntitlementUpdater.UpdateEntitlement
// (entitlement.Entitlement.Apply has the rules).
func (o Shared) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	var out entitlement.Entitlement
	err := o.run(ctx, "update entitlement", func(tx unit.Tx) error {
		e, err := tx.Entitlement(id)
		if err != nil {
			return err
		}
		now := tx.Now()
		expired := e.ExpireHolds(now)
		if err := e.Apply(u, now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "update of entitlement %q", id)
		}
		e = tx.Normalize(e)
		tx.UpdateEntitlement(e.Clone(), expired, nil)
		e.Refresh(now)
		out = e
		return nil
	})
	return out, err
}
