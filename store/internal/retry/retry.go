// Package retry is the one retry loop of the stores' transactions: jittered,
// doubling backoff for at most a budget, which ends at the caller's deadline
// if that comes first. Each backend classifies its own errors (what is
// contention) and translates the error the loop stops with; only the
// adapters under store/ import it.
package retry

import (
	"context"
	"math/rand/v2"
	"time"
)

// Policy is a backoff between attempts: jittered over [w/2, w), with w
// doubling from First up to Max, for at most Budget.
type Policy struct {
	First, Max, Budget time.Duration
	// Stretch makes the wait after a slow attempt at least a quarter of
	// that attempt's time (up to Max): an attempt that waited long for its
	// locks lost a round of a deadlock, and coming back at once would lose
	// the next round too (the Firestore emulator holds such transactions
	// about 2 s).
	Stretch bool
}

// Stop says why Run stopped.
type Stop int

const (
	// Done: the last attempt succeeded, or failed with an error that is
	// not retryable (Run's error is that attempt's).
	Done Stop = iota
	// Exhausted: the next wait would pass the budget or the caller's
	// deadline; the error is the last attempt's.
	Exhausted
	// Cancelled: ctx ended between attempts; the error is ctx's.
	Cancelled
)

// Run calls attempt until it returns nil or an error retryable rejects, ctx
// ends, or the next wait would end after the budget or ctx's deadline (a
// retry that would outlast the caller gives up at once: a definite failure
// rather than a wait that ends in an uncertain one). retryable is called
// once for every failed attempt, after it.
func Run(ctx context.Context, p Policy, attempt func() error, retryable func(error) bool) (error, Stop) {
	deadline := time.Now().Add(p.Budget)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	wait := p.First
	for {
		began := time.Now()
		err := attempt()
		if err == nil || ctx.Err() != nil || !retryable(err) {
			return err, Done
		}
		if p.Stretch {
			wait = max(wait, min(time.Since(began)/4, p.Max))
		}
		// Full jitter over [wait/2, wait): callers that collided spread out.
		d := wait/2 + rand.N(wait/2+1)
		if time.Now().Add(d).After(deadline) {
			return err, Exhausted
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err(), Cancelled
		case <-t.C:
		}
		wait = min(2*wait, p.Max)
	}
}
