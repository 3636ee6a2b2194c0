package postgres

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/internal/pgfault"
)

// Backoff between transaction attempts: jittered, doubling from retryFirst
// up to retryMax, for at most the store's retry budget.
const (
	retryFirst = 2 * time.Millisecond
	retryMax   = 200 * time.Millisecond
)

// errRetry makes run start the transaction again: a body returns it when a
// guard it inserted with ON CONFLICT DO NOTHING was taken by another
// transaction that committed meanwhile, which the next attempt reads.
var errRetry = errors.New("a unique guard was taken concurrently")

// run runs fn in a READ COMMITTED transaction and commits it, retrying
// (from the start, with jittered backoff) when the server broke a deadlock
// or a serialization failure, or when fn returns errRetry (a unique guard
// was taken concurrently), until it commits, fails otherwise, ctx ends, or
// the retry budget is spent. fn may run more than once: it must only
// compute from what it reads. Errors are translated, with what naming the
// operation; one from a COMMIT whose answer was lost is Uncertain, every
// other one committed nothing.
func (s *Store) run(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	deadline := time.Now().Add(s.retryBudget)
	wait := retryFirst
	for {
		committing, err := s.attempt(ctx, fn)
		if err == nil {
			return nil
		}
		if !(errors.Is(err, errRetry) || pgfault.Retryable(err)) || ctx.Err() != nil {
			if committing {
				return pgfault.Write(err, "%s", what)
			}
			return pgfault.Read(err, "%s", what)
		}
		// Full jitter over [wait/2, wait): transactions that collided spread out.
		d := wait/2 + rand.N(wait/2+1)
		if time.Now().Add(d).After(deadline) {
			return pgfault.Read(err, "%s: contention outlasted the retry budget", what)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return pgfault.Read(ctx.Err(), "%s", what)
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
	}
}

// attempt runs fn once in a transaction. committing reports that fn
// succeeded and the COMMIT was sent, so a failure may have committed.
func (s *Store) attempt(ctx context.Context, fn func(tx pgx.Tx) error) (committing bool, err error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	if err := fn(tx); err != nil {
		// Bounded on a context of its own, as ctx may have ended; a
		// rollback that fails closes the connection, which rolls back too.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
		defer cancel()
		_ = tx.Rollback(rctx)
		return false, err
	}
	return true, tx.Commit(ctx)
}

// rollbackTimeout bounds the rollback of a failed transaction.
const rollbackTimeout = 2 * time.Second
