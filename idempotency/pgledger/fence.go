package pgledger

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fence"
	"github.com/stipend-mcp/stipend/internal/pgfault"
)

// Fence implements idempotency.Ledger. The PostgreSQL store checks these
// fences (store/postgres) when it runs on the ledger's pool.
func (l *Ledger) Fence(res idempotency.Reservation) fence.Fence {
	return &Fence{FenceClaim: idempotency.FenceClaim{Reference: l.Reference(res.ID), Reservation: res}, l: l}
}

// Fence is the claim of one reservation of a PostgreSQL ledger. The
// store's transaction calls Mark with its change: the UPDATE that marks
// the row written also locks it until the transaction ends, so Reclaim's
// guarded DELETE waits for it and then finds the row changed (or, if the
// transaction rolled back, unchanged and reclaimable).
type Fence struct {
	idempotency.FenceClaim
	l *Ledger
}

// Pool is the ledger's pool: the store checks the fence only in a
// transaction on the same pool (the same database and schema).
func (f *Fence) Pool() *pgxpool.Pool { return f.l.pool }

// Mark, in tx (the change's transaction, on Pool), marks the reservation's
// row written at now if it still is the reservation, in progress: nil, or
// an error wrapping store.ErrFenced (the change must not be made).
func (f *Fence) Mark(ctx context.Context, tx pgx.Tx, now time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE idempotency_ledger SET written_at = coalesce(written_at, $4), updated_at = `+nextUpdate+`
		WHERE collection = $1 AND id = $2 AND attempt = $3 AND state = 'in_progress'`,
		f.l.rows.Collection(), f.Reservation.ID, f.Reservation.Token, now.UTC())
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return fence.Lost(f, "the row is gone, completed, or another reservation's")
	}
	return nil
}

// Reclaim implements idempotency.Ledger: a DELETE guarded by rec's update
// time, the in-progress state, the fence and the absence of a mark.
func (l *Ledger) Reclaim(ctx context.Context, rec idempotency.Record) error {
	if !idempotency.ValidID(rec.ID) {
		return fault.Errorf(fault.CodeInvalid, "id: not a hashed key")
	}
	if err := idempotency.CheckReclaim(rec, l.Reference(rec.ID)); err != nil {
		return err
	}
	tag, err := l.pool.Exec(ctx, `DELETE FROM idempotency_ledger WHERE collection = $1 AND id = $2 AND updated_at = $3
		AND state = 'in_progress' AND fenced AND written_at IS NULL`, l.rows.Collection(), rec.ID, rec.UpdateTime)
	if err != nil {
		return pgfault.Write(err, "reclaim %s", l.Reference(rec.ID))
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	return l.refused(ctx, rec.ID, "reclaim", rec.UpdateTime)
}
