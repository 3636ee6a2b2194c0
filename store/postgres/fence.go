package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// txFence is what the store needs of a fence (see store.Fence):
// idempotency/pgledger's fences have it. The ledger's table is in the
// store's database, so the change's own transaction marks the row, and
// the row lock that takes orders it against the ledger's guarded writes.
type txFence interface {
	store.Fence
	// Pool is the ledger's pool; the store checks only fences of its own.
	Pool() *pgxpool.Pool
	// Mark marks the row written in tx if it still is the reservation:
	// nil, or an error wrapping store.ErrFenced.
	Mark(ctx context.Context, tx pgx.Tx, now time.Time) error
}

// markFence, in tx, for a change about to be made, marks the fence ctx
// carries (nothing without one); an error fails the transaction, which
// then changes nothing. A fence the store cannot check (of another backend,
// or of a ledger on another pool) is an Internal error.
func (s *Store) markFence(ctx context.Context, tx pgx.Tx, now time.Time) error {
	tf, ok, err := unit.FenceOf[txFence](ctx, "PostgreSQL")
	if !ok {
		return err
	}
	if tf.Pool() != s.pool {
		return store.Errorf(store.CodeInternal, "%s: the ledger is on another pool than the store", tf.Claim())
	}
	return tf.Mark(ctx, tx, now)
}
