package firestore

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

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
//
// A flight runs on a context of its own, which keeps the values of the
// caller that started it and is bounded by the retry budget, not by any
// caller's deadline, and it runs on when its callers leave: the change
// they asked for is made once, and their retries (they were told it may
// have been) replay it. Stopped with its callers, the flights of several
// instances kept meeting in the emulator's two-second lock waits and all
// gave up together at the callers' two-second deadline, round after round
// (15–27 s to the first success, against 3 s). A change carrying a fence
// (store.Fence) belongs to one request and shares nothing: it runs on its
// caller's context, so a caller that gives up leaves its reservation
// unwritten, and the key heals itself, rather than written behind an
// answer the client never got.

// flights shares one run of a call among concurrent identical calls.
type flights[T any] struct{ g singleflight.Group }

// do runs fn, or joins the run of fn under key already in flight, and
// returns its answer (joined true for a caller that did not start the run),
// or an Unavailable error, marked Uncertain, if ctx ends first.
func (f *flights[T]) do(ctx context.Context, key, what string, budget time.Duration, fn func(context.Context) (T, error)) (val T, joined bool, err error) {
	started := false
	ch := f.g.DoChan(key, func() (any, error) {
		started = true // read by this caller only after the answer arrives
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), budget)
		defer cancel()
		return fn(fctx)
	})
	select {
	case r := <-ch:
		v, _ := r.Val.(T)
		return v, !started, r.Err
	case <-ctx.Done():
		var zero T
		return zero, false, &store.Error{Code: store.CodeUnavailable, Err: ctx.Err(), Uncertain: true,
			Message: what + ": gave up waiting; the change may still be made, retry it"}
	}
}

// Different changes of one payment (refunds asked with other
// Idempotency-Keys, a completion racing a failure) share no flight, and on
// Firestore their transactions, each reading the payment and then writing
// it, waited on one another's locks until every caller's deadline had
// passed: all were told "may have been applied" while one of them was
// applied behind them. So within an instance the changes of one payment
// take turns (turns.take): each runs alone, in a few round trips, and the
// next one reads what it left. A caller whose deadline ends while it waits
// for its turn is told, for certain, that nothing was attempted; one whose
// turn comes too late to finish (less than minTurn left) is told the same
// rather than have its commit cut off mid-way. Between instances the turns
// contend as before, a few at a time.

// minTurn is the least time a change needs to be started: a transaction on
// a payment is a handful of round trips.
const minTurn = 250 * time.Millisecond

// turns queues the changes of each payment.
type turns struct {
	mu sync.Mutex
	m  map[string]*turn
}

type turn struct {
	slot    chan struct{} // holds a token while a change runs
	waiters int
}

// take waits for the turn of payment id and returns its release, or a
// certain Unavailable error when ctx ends first or leaves too little time.
func (q *turns) take(ctx context.Context, id, what string) (release func(), err error) {
	q.mu.Lock()
	if q.m == nil {
		q.m = make(map[string]*turn)
	}
	t := q.m[id]
	if t == nil {
		t = &turn{slot: make(chan struct{}, 1)}
		q.m[id] = t
	}
	t.waiters++
	q.mu.Unlock()
	leave := func() {
		q.mu.Lock()
		if t.waiters--; t.waiters == 0 {
			delete(q.m, id)
		}
		q.mu.Unlock()
	}
	select {
	case t.slot <- struct{}{}:
	case <-ctx.Done():
		leave()
		return nil, store.Wrap(store.CodeUnavailable, ctx.Err(), "%s: not attempted: other changes of the payment ran first; retry", what)
	}
	release = func() {
		<-t.slot
		leave()
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < minTurn {
		release()
		return nil, store.Errorf(store.CodeUnavailable, "%s: not attempted: too little time left after other changes of the payment; retry", what)
	}
	return release, nil
}

// inTurn runs change in the turn of payment id.
func inTurn[T any](s *Store, ctx context.Context, id, what string, change func(context.Context) (T, error)) (T, error) {
	release, err := s.turns.take(ctx, id, what)
	if err != nil {
		var zero T
		return zero, err
	}
	defer release()
	return change(ctx)
}
