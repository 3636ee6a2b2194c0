// Package coalesce queues concurrent operations on one key (an entitlement)
// so that one goroutine per busy key applies whatever has queued as one
// batch, in one transaction of the adapter's. A hot entitlement (an agent
// running many tool calls in parallel) then costs one transaction and one
// row lock per batch instead of one per call: while a batch commits, the
// next one gathers, so batches grow with the load and no timer delays a
// lone call. Between instances, batches contend like ordinary transactions.
//
// This is the mechanism of the Firestore store's coalesce.go, written once
// for any adapter; only the adapters under store/ import it.
package coalesce

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// Call is one queued operation and its caller's context.
type Call[Op any] struct {
	Ctx context.Context
	Op  Op
}

// Result is what Apply answers one call: a value, or an error for that
// call alone.
type Result[Res any] struct {
	Value Res
	Err   error
}

// Apply runs one batch of calls on key, in order, in one atomic step, and
// returns one result per call; an error fails every call of the batch (and
// then none of them may have been applied, unless it is Uncertain). ctx is
// the batch's own: bounded by the lanes' budget and cancelled once every
// caller has left.
type Apply[Op, Res any] func(ctx context.Context, key string, calls []Call[Op]) ([]Result[Res], error)

// Lanes holds the queued calls per key. The zero value is not usable; call
// New.
type Lanes[Op, Res any] struct {
	apply    Apply[Op, Res]
	maxBatch int
	gather   time.Duration
	budget   time.Duration

	mu sync.Mutex
	m  map[string]*lane[Op, Res]
}

// New returns lanes that apply batches of at most maxBatch calls with
// apply. gather is how long a busy lane waits, at most, for as many calls
// as its previous batch held before it starts the next one (0: never);
// budget bounds one batch, retries included.
func New[Op, Res any](apply Apply[Op, Res], maxBatch int, gather, budget time.Duration) *Lanes[Op, Res] {
	return &Lanes[Op, Res]{apply: apply, maxBatch: max(maxBatch, 1), gather: max(gather, 0), budget: budget, m: make(map[string]*lane[Op, Res])}
}

// A present lane means a drainer goroutine owns it.
type lane[Op, Res any] struct {
	q       []*pending[Op, Res]
	arrived chan struct{} // signalled (without blocking) on every add
}

type pending[Op, Res any] struct {
	call Call[Op]
	done chan Result[Res] // buffered: the drainer never blocks on a caller
}

// Do queues op on key's lane and waits for its result. When ctx ends first,
// the answer is an Unavailable error that is Uncertain: the batch may still
// apply the call, and a retry with the same idempotency key is safe.
func (l *Lanes[Op, Res]) Do(ctx context.Context, key string, op Op) (Res, error) {
	p := &pending[Op, Res]{call: Call[Op]{Ctx: ctx, Op: op}, done: make(chan Result[Res], 1)}
	if l.add(key, p) {
		go l.drain(key)
	}
	select {
	case r := <-p.done:
		return r.Value, r.Err
	case <-ctx.Done():
		var zero Res
		return zero, &store.Error{Code: store.CodeUnavailable, Err: ctx.Err(), Uncertain: true,
			Message: "gave up waiting for the entitlement's batch; it may have been applied, retry with the same key"}
	}
}

// add queues p and reports whether the caller must start the lane's drainer.
func (l *Lanes[Op, Res]) add(key string, p *pending[Op, Res]) (start bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln, running := l.m[key]
	if !running {
		ln = &lane[Op, Res]{arrived: make(chan struct{}, 1)}
		l.m[key] = ln
	}
	ln.q = append(ln.q, p)
	select {
	case ln.arrived <- struct{}{}:
	default:
	}
	return !running
}

// take removes up to maxBatch queued calls; with none left it closes the
// lane and returns nil, so the next add starts a new drainer. If fewer than
// want are queued, it first waits up to the gather window for more: on a
// hot lane the callers of the last batch come back nearly together, and
// without this pause the first of them would ride alone while the rest wait.
func (l *Lanes[Op, Res]) take(key string, want int) []*pending[Op, Res] {
	n := l.maxBatch
	l.mu.Lock()
	ln := l.m[key]
	if len(ln.q) == 0 {
		delete(l.m, key)
		l.mu.Unlock()
		return nil
	}
	if len(ln.q) < min(want, n) && l.gather > 0 {
		l.mu.Unlock()
		timer := time.NewTimer(l.gather)
	wait:
		for {
			select {
			case <-timer.C:
				break wait
			case <-ln.arrived:
				l.mu.Lock()
				enough := len(ln.q) >= min(want, n)
				l.mu.Unlock()
				if enough {
					timer.Stop()
					break wait
				}
			}
		}
		l.mu.Lock()
	}
	defer l.mu.Unlock()
	k := min(n, len(ln.q))
	batch := ln.q[:k:k]
	if k == len(ln.q) {
		ln.q = make([]*pending[Op, Res], 0, 8) // drop the old array; the lane stays open
	} else {
		ln.q = ln.q[k:]
	}
	return batch
}

// drain applies the lane's queued calls, batch after batch, until it is empty.
func (l *Lanes[Op, Res]) drain(key string) {
	last := 0 // size of the previous batch: how many callers may come back
	for {
		batch := l.take(key, last)
		if batch == nil {
			return
		}
		last = len(batch)
		live := batch[:0]
		for _, p := range batch {
			if err := p.call.Ctx.Err(); err != nil {
				// The caller left before its batch: nothing was applied.
				p.done <- Result[Res]{Err: store.Wrap(store.CodeUnavailable, err, "not attempted: the caller left")}
				continue
			}
			live = append(live, p)
		}
		if len(live) > 0 {
			l.run(key, live)
		}
	}
}

// run applies one batch and answers every caller. If the batch fails, every
// call in it fails with Unavailable (corrupt data and bugs stay Internal);
// nothing of the batch was applied then, unless the error is Uncertain.
func (l *Lanes[Op, Res]) run(key string, batch []*pending[Op, Res]) {
	// The batch serves all its callers, so it runs on its own context,
	// bounded by the budget and cancelled once every caller has left.
	ctx, cancel := context.WithTimeout(context.Background(), l.budget)
	defer cancel()
	var waiting atomic.Int64
	waiting.Store(int64(len(batch)))
	calls := make([]Call[Op], len(batch))
	for i, p := range batch {
		calls[i] = p.call
		stop := context.AfterFunc(p.call.Ctx, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	results, err := l.apply(ctx, key, calls)
	if err == nil && len(results) != len(batch) {
		err = store.Errorf(store.CodeInternal, "batch of %d calls answered %d results", len(batch), len(results))
	}
	if err != nil {
		if store.CodeOf(err) != store.CodeInternal {
			err = &store.Error{Code: store.CodeUnavailable, Err: err, Uncertain: store.IsUncertain(err),
				Message: "the entitlement's batch did not commit"}
		}
		for _, p := range batch {
			p.done <- Result[Res]{Err: err}
		}
		return
	}
	for i, p := range batch {
		p.done <- results[i]
	}
}
