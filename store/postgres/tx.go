package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store/internal/retry"
)

// policy is the backoff between transaction attempts: jittered, doubling
// from 2 ms up to 200 ms (store/internal/retry).
func (s *Store) policy() retry.Policy {
	return retry.Policy{First: 2 * time.Millisecond, Max: 200 * time.Millisecond, Budget: s.retryBudget}
}

// errRetry makes run start the transaction again: a body returns it when a
// guard it inserted with ON CONFLICT DO NOTHING was taken by another
// transaction that committed meanwhile, which the next attempt reads.
var errRetry = errors.New("a unique guard was taken concurrently")

// run runs fn in a READ COMMITTED transaction and commits it, retrying
// (from the start, with the shared retry loop) when the server broke a
// deadlock or a serialization failure, or when fn returns errRetry (a
// unique guard was taken concurrently), until it commits, fails otherwise,
// ctx ends, or the retry budget (or ctx's deadline, if sooner) is spent.
// fn may run more than once: it must only compute from what it reads.
// Errors are translated, with what naming the operation; one from a COMMIT
// whose answer was lost is Uncertain, every other one committed nothing.
func (s *Store) run(ctx context.Context, what string, fn func(tx pgx.Tx) error) error {
	return s.retried(ctx, what, func() (bool, error) { return s.attempt(ctx, fn) })
}

// retried runs attempt, retrying it under contention (errRetry, a deadlock
// or serialization failure) within the store's retry budget and ctx, and
// translates its last error, with what naming the operation: Uncertain
// when the attempt reports it had sent its COMMIT.
func (s *Store) retried(ctx context.Context, what string, attempt func() (committing bool, err error)) error {
	committing := false
	err, stop := retry.Run(ctx, s.policy(), func() error {
		var err error
		committing, err = attempt()
		return err
	}, func(err error) bool { return errors.Is(err, errRetry) || pgfault.Retryable(err) })
	switch {
	case err == nil:
		return nil
	case stop == retry.Exhausted:
		return pgfault.Read(err, "%s: contention outlasted the retry budget (or the caller's deadline, if sooner)", what)
	case stop == retry.Cancelled || !committing:
		return pgfault.Read(err, "%s", what)
	}
	return pgfault.Write(err, "%s", what)
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
