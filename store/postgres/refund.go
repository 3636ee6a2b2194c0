package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// RefundConsumption implements store.EntitlementStore: one transaction that
// locks the consumption's entitlement (as every change of it does, so a
// refund and the entitlement's batches wait for each other), then reads the
// consumption, refunds it with the charge engine and writes both.
func (s *Store) RefundConsumption(ctx context.Context, id string, amount entitlement.Amount) (store.RefundResult, error) {
	entitlementID, err := one(ctx, s.pool, func(r pgx.Row) (id string, err error) { err = r.Scan(&id); return },
		store.Errorf(store.CodeNotFound, "consumption %q", id), `SELECT entitlement_id FROM consumptions WHERE id = $1`, id)
	if err != nil {
		return store.RefundResult{}, pgfault.Read(err, "read consumption")
	}
	var out store.RefundResult
	err = s.run(ctx, "refund consumption", func(tx pgx.Tx) error {
		e, err := readEntitlement(ctx, tx, entitlementID, " FOR UPDATE")
		if err != nil {
			return err
		}
		// The clock after the lock: see Store.clock.
		b := charge.Batch{Now: s.clock(), ID: entitlementID, E: e, Found: true}
		expired := b.Start()
		c, err := scanConsumption(tx.QueryRow(ctx, `SELECT `+consumptionColumns+` FROM consumptions WHERE id = $1`, id))
		if err != nil {
			return err
		}
		if c.WalletID != "" && c.Refund == nil {
			if err := lockMember(ctx, tx, &b, c.WalletID, c.AgentID); err != nil {
				return err
			}
		}
		r := charge.Record{Cons: &c}
		if out, err = b.Refund(&r, id, amount, func() error { return s.markFence(ctx, tx, b.Now) }); err != nil || out.Replayed {
			return err
		}
		if err := writeMembers(ctx, tx, &b); err != nil {
			return err
		}
		if err := endHolds(ctx, tx, expired, entitlement.HoldExpired, b.Now); err != nil {
			return err
		}
		if err := updateEntitlement(ctx, tx, &b.E); err != nil {
			return err
		}
		f := r.Cons.Refund
		if _, err := tx.Exec(ctx, `UPDATE consumptions SET refund_cost_cents = $2, refund_cost_currency = $3,
			refund_units = $4, refunded_at = $5 WHERE id = $1`, id, f.Cost.Cents, f.Cost.Currency, f.Units, f.RefundedAt); err != nil {
			return err
		}
		for _, ev := range b.Events {
			q, args, err := insertEvent(unit.Pending(ev), b.Now)
			if err == nil {
				_, err = tx.Exec(ctx, q, args...)
			}
			if err != nil {
				return err
			}
		}
		return nil
	})
	return out, err
}

// ExpireHolds implements store.EntitlementStore: it finds entitlements with
// open holds past their expiry through the holds table and ends them, each
// entitlement in a transaction of its own. An entitlement whose row another
// transaction holds is skipped (SKIP LOCKED): that transaction ends its
// expired holds itself.
func (s *Store) ExpireHolds(ctx context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, store.Errorf(store.CodeInvalid, "limit: must be positive")
	}
	now := s.clock()
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT entitlement_id FROM holds
		WHERE status = 'held' AND expires_at <= $1 LIMIT $2`, now, limit)
	if err != nil {
		return 0, pgfault.Read(err, "find expired holds")
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return 0, pgfault.Read(err, "find expired holds")
	}
	ended := 0
	for _, id := range ids {
		n := 0
		err := s.run(ctx, "expire holds", func(tx pgx.Tx) error {
			n = 0
			e, err := readEntitlement(ctx, tx, id, " FOR UPDATE SKIP LOCKED")
			if errors.Is(err, store.ErrNotFound) {
				return nil // another transaction holds it
			}
			if err != nil {
				return err
			}
			now := s.clock() // after the lock: see Store.clock
			expired := e.ExpireHolds(now)
			if len(expired) == 0 {
				return nil
			}
			n = len(expired)
			if err := endHolds(ctx, tx, expired, entitlement.HoldExpired, now); err != nil {
				return err
			}
			return updateEntitlement(ctx, tx, &e)
		})
		if err != nil {
			return ended, err
		}
		ended += n
	}
	return ended, nil
}
