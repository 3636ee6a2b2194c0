package firestore

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// Backoff between transaction attempts: jittered, doubling from
// retryFirst up to retryMax (and at least a quarter of the failed
// attempt's time, up to retryMax), for at most the store's retry budget.
// Firestore's own RunTransaction retry starts near one second, far too slow
// for a consume, so each attempt runs with MaxAttempts(1) and this loop
// decides.
const (
	retryFirst = 15 * time.Millisecond
	retryMax   = 800 * time.Millisecond
)

// run runs fn in a transaction, retrying contention (Aborted) and lost
// create races (AlreadyExists) with jittered backoff until it commits, fails
// otherwise, ctx ends, or the retry budget is spent. The budget ends at
// ctx's deadline if that comes first: a retry whose backoff would outlast
// the caller gives up at once, a definite failure rather than a wait that
// ends in an uncertain one. fn may run more than once: it must only compute
// from what it reads. Errors are translated, with what naming the
// operation; one from a commit whose answer was lost is marked Uncertain
// (store.Error), every other one changed nothing.
func (s *Store) run(ctx context.Context, what string, fn func(context.Context, *firestore.Transaction) error) error {
	deadline := time.Now().Add(s.retryBudget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := retryFirst
	torn := 0 // attempts retried for a torn read (guard.go)
	for {
		committing := false // fn succeeded, so the client sent the commit
		began := time.Now()
		err := s.client.RunTransaction(ctx, func(ctx context.Context, tx *firestore.Transaction) error {
			committing = false
			if err := fn(ctx, tx); err != nil {
				return err
			}
			committing = true
			return nil
		}, firestore.MaxAttempts(1))
		// A commit's FailedPrecondition is a guarded document read stale
		// (guard.go): contention, like Aborted. Only the commit's: a read's
		// (a query without its index) is no contention.
		stale := committing && staleRead(err)
		if t, ok := errors.AsType[*tornRead](err); ok {
			if stale = torn < maxTorn; stale {
				torn++
			} else {
				err = t.err // not a torn read: the data disagree
			}
		}
		if err == nil || !(retryable(err) || stale) || ctx.Err() != nil {
			if committing {
				return fsfault.Write(err, "%s", what)
			}
			return fsfault.Read(err, "%s", what)
		}
		s.counters.countRetry(err, stale)
		// An attempt that waited long for its locks lost a round of a
		// deadlock (the emulator holds transactions that read one document
		// and then write it for about 2 s, then lets one commit): the losers
		// stay away for a quarter of that time, at most retryMax, so the
		// winner commits before they lock the document again. Coming back
		// after retryFirst, 20 such transactions kept aborting each other
		// until the budget was spent.
		wait = max(wait, min(time.Since(began)/4, retryMax))
		// Full jitter over [wait/2, wait): instances that collided spread out.
		d := wait/2 + rand.N(wait/2+1)
		if time.Now().Add(d).After(deadline) {
			return fsfault.Read(err, "%s: contention outlasted the retry budget (or the caller's deadline, if sooner)", what)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fsfault.Read(ctx.Err(), "%s", what)
		case <-t.C:
		}
		wait = min(2*wait, retryMax)
	}
}
