package firestore

import (
	"context"
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
