package firestore

import (
	"context"
	"errors"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/retry"
)

// policy is the backoff between transaction attempts: jittered, doubling
// from 15 ms up to 800 ms, and at least a quarter of a slow attempt's time
// (store/internal/retry). Firestore's own RunTransaction retry starts near
// one second, far too slow for a consume, so each attempt runs with
// MaxAttempts(1) and the shared loop decides.
func (s *Store) policy() retry.Policy {
	return retry.Policy{First: 15 * time.Millisecond, Max: 800 * time.Millisecond, Budget: s.retryBudget, Stretch: true}
}

// run runs fn in a transaction, retrying contention (Aborted, a guarded
// document read stale) and lost create races (AlreadyExists) with the
// shared retry loop until it commits, fails otherwise, ctx ends, or the
// retry budget (or ctx's deadline, if sooner) is spent. fn may run more
// than once: it must only compute from what it reads. Errors are
// translated, with what naming the operation; one from a commit whose
// answer was lost is marked Uncertain (store.Error), every other one
// changed nothing.
func (s *Store) run(ctx context.Context, what string, fn func(context.Context, *firestore.Transaction) error) error {
	torn := 0           // attempts retried for a torn read (guard.go)
	committing := false // fn succeeded, so the client sent the commit
	err, stop := retry.Run(ctx, s.policy(), func() error {
		err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			committing = false
			if err := fn(ctx, tx); err != nil {
				return err
			}
			committing = true
			return nil
		}, firestore.MaxAttempts(1))
		if t, ok := errors.AsType[*tornRead](err); ok && torn == maxTorn {
			return t.err // not a torn read: the data disagree
		}
		return err
	}, func(err error) bool {
		// A commit's FailedPrecondition is a guarded document read stale
		// (guard.go): contention, like Aborted. Only the commit's: a read's
		// (a query without its index) is no contention.
		stale := committing && staleRead(err)
		if _, ok := errors.AsType[*tornRead](err); ok {
			torn++
			stale = true
		}
		if !retryable(err) && !stale {
			return false
		}
		s.counters.countRetry(err, stale)
		return true
	})
	switch {
	case err == nil:
		return nil
	case stop == retry.Exhausted:
		return outlasted(err, what)
	case stop == retry.Cancelled || !committing:
		return fsfault.Read(err, "%s", what)
	}
	return fsfault.Write(err, "%s", what)
}

// outlasted is the error of a transaction whose contention outlasted the
// retry budget (or the caller's deadline): its last attempt failed as
// contention (an abort, a guarded document read stale, a torn read), so
// nothing was written, and a retry with the same key may well succeed. It is
// Unavailable and certain, whatever the last attempt's code: a stale read's
// FailedPrecondition would otherwise read as a deployment fault (Internal).
func outlasted(err error, what string) error {
	return &store.Error{Code: store.CodeUnavailable, Err: err,
		Message: what + ": contention outlasted the retry budget (or the caller's deadline, if sooner); nothing was written, retry with the same key"}
}
