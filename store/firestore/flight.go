package firestore

import (
	"context"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// Concurrent changes of one payment (a provider's webhook retried while
// the billing integration calls succeed, or many callers completing one
// checkout) would each run a transaction that reads the payment and then
// writes it. On Firestore such transactions wait on each other's locks:
// a dozen of them in one instance aborted one another until their retry
// budget was spent, every one of them. So the same change of one payment
// runs once per instance at a time: later callers wait for the answer of
// the transaction in flight (flights.do). Between instances the flights
// contend like ordinary transactions, a few at a time, and are retried
// (Store.run).

// flights shares one run of a call among concurrent identical calls. Unlike
// golang.org/x/sync/singleflight, the shared run does not belong to its
// first caller: it runs on a context of its own, which keeps the first
// caller's values and deadline (capped at the retry budget; the retry loop
// plans with it, as for a lane's batch, see sharedContext) and is cancelled
// once every caller has left, so one caller giving up does not fail the
// others.
type flights[T any] struct {
	mu sync.Mutex
	m  map[string]*flight[T]
}

// flight is one shared run.
type flight[T any] struct {
	done    chan struct{} // closed when val and err are set
	val     T
	err     error
	waiting int // callers still waiting
	cancel  context.CancelFunc
}

// do runs fn, or joins the run of fn under key already in flight, and
// returns its answer (joined true for a caller that did not start the run),
// or an Unavailable error if ctx ends first (the shared run may still apply
// the change then: the error is Uncertain). fn's context keeps the values
// of ctx of the caller that started the run.
func (f *flights[T]) do(ctx context.Context, key, what string, budget time.Duration, fn func(context.Context) (T, error)) (val T, joined bool, err error) {
	f.mu.Lock()
	if f.m == nil {
		f.m = make(map[string]*flight[T])
	}
	fl := f.m[key]
	joined = fl != nil
	if fl == nil {
		deadline := time.Now().Add(budget)
		if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
			deadline = d
		}
		fctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		fl = &flight[T]{done: make(chan struct{}), cancel: cancel}
		f.m[key] = fl
		go func() {
			fl.val, fl.err = fn(fctx)
			cancel()
			f.forget(key, fl)
			close(fl.done)
		}()
	}
	fl.waiting++
	f.mu.Unlock()
	select {
	case <-fl.done:
		return fl.val, joined, fl.err
	case <-ctx.Done():
		f.mu.Lock()
		if fl.waiting--; fl.waiting == 0 {
			// Nobody waits for this run any more: stop it, and let the
			// next caller start a run of its own.
			fl.cancel()
			f.forgetLocked(key, fl)
		}
		f.mu.Unlock()
		var zero T
		return zero, joined, &store.Error{Code: store.CodeUnavailable, Err: ctx.Err(), Uncertain: true,
			Message: what + ": gave up waiting; the change may have been applied, retry it"}
	}
}

// forget removes fl from the flights under key, if it is still there.
func (f *flights[T]) forget(key string, fl *flight[T]) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.forgetLocked(key, fl)
}

func (f *flights[T]) forgetLocked(key string, fl *flight[T]) {
	if f.m[key] == fl {
		delete(f.m, key)
	}
}
