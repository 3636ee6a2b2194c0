// Package coalesce queues concurrent operations on one key (an entitlement)
// so that one goroutine per busy key applies whatever has queued as one
// batch, in one transaction of the adapter's. A hot entitlement (an agent
// running many tool calls in parallel) then costs one transaction and one
// row lock per batch instead of one per call: while a batch commits, the
// next one gathers, so batches grow with the load and no timer delays a
// lone call. Between instances, batches contend like ordinary transactions.
//
// It is the one coalescer of the stores that batch (PostgreSQL, Firestore);
// only the adapters under store/ import it. Lanes own their goroutines:
// Close refuses new calls and waits for every drainer to finish.
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

// Result is what a batch answers one call: a value, or an error for that
// call alone.
type Result[Res any] struct {
	Value Res
	Err   error
}

// Apply runs one batch of calls on key. It answers the calls it applied
// with Batch.Answer; the calls it leaves unanswered and returns nil for
// were not applied, and queue again at the front of the lane, in order (a
// batch may take on fewer calls than it was given: a commit's write limit).
// An error fails every call it left unanswered: then none of them was
// applied, unless the error is Uncertain. ctx is the batch's own (Shared):
// it ends when the last caller has left.
type Apply[Op, Res any] func(ctx context.Context, key string, b *Batch[Op, Res]) error

// Batch is the calls one Apply runs, and their answers.
type Batch[Op, Res any] struct {
	calls    []*pending[Op, Res]
	answered []bool
	n        int
}

// Len is the number of calls in the batch.
func (b *Batch[Op, Res]) Len() int { return len(b.calls) }

// Op returns call i's operation.
func (b *Batch[Op, Res]) Op(i int) Op { return b.calls[i].call.Op }

// Ctx returns call i's caller's context.
func (b *Batch[Op, Res]) Ctx(i int) context.Context { return b.calls[i].call.Ctx }

// Answer answers call i with r. Each call is answered at most once; a
// second answer is ignored.
func (b *Batch[Op, Res]) Answer(i int, r Result[Res]) {
	if b.answered[i] {
		return
	}
	b.answered[i] = true
	b.n++
	b.calls[i].done <- r
}

// Answered reports whether call i has been answered.
func (b *Batch[Op, Res]) Answered(i int) bool { return b.answered[i] }

// Lanes holds the queued calls per key. The zero value is not usable; call
// New.
type Lanes[Op, Res any] struct {
	apply    Apply[Op, Res]
	what     func(Op) string
	maxBatch int
	gather   time.Duration
	budget   time.Duration

	mu     sync.Mutex
	m      map[string]*lane[Op, Res]
	closed bool
	wg     sync.WaitGroup // the drainers
}

// Options tune Lanes.
type Options[Op any] struct {
	// MaxBatch bounds the calls of one batch (at least 1).
	MaxBatch int
	// Gather is how long a busy lane waits, at most, for as many calls as
	// its previous batch held before it starts the next one (0: never).
	Gather time.Duration
	// Budget bounds one batch, retries included.
	Budget time.Duration
	// What names an operation in errors ("consume", "capture hold").
	What func(Op) string
}

// New returns lanes that apply batches with apply.
func New[Op, Res any](apply Apply[Op, Res], o Options[Op]) *Lanes[Op, Res] {
	what := o.What
	if what == nil {
		what = func(Op) string { return "call" }
	}
	return &Lanes[Op, Res]{apply: apply, what: what, maxBatch: max(o.MaxBatch, 1), gather: max(o.Gather, 0),
		budget: o.Budget, m: make(map[string]*lane[Op, Res])}
}

// A present lane means a drainer goroutine owns it.
type lane[Op, Res any] struct {
	q       []*pending[Op, Res]
	arrived chan struct{} // signalled (without blocking) on every add
}

// The states of a call: queued, then taken on by a batch, or left by its
// caller (past its deadline, or gone) before a batch took it on; a batch
// that does not take on a call puts it back, queued. Only a call that left
// while queued is sure not to have been applied.
const (
	callQueued int32 = iota
	callTaken
	callLeft
)

type pending[Op, Res any] struct {
	call  Call[Op]
	done  chan Result[Res] // buffered: the drainer never blocks on a caller
	state atomic.Int32
}

// ErrClosed is the error of a call made after Close: Unavailable, and
// certainly not applied.
var ErrClosed = &store.Error{Code: store.CodeUnavailable, Message: "the store is closed"}

// Do queues op on key's lane and waits for its result. When ctx ends first,
// the answer is an Unavailable error: "not attempted" if no batch had taken
// the call on (nothing was applied), else Uncertain (the batch may still
// apply it; a retry with the same idempotency key is safe).
func (l *Lanes[Op, Res]) Do(ctx context.Context, key string, op Op) (Res, error) {
	var zero Res
	p := &pending[Op, Res]{call: Call[Op]{Ctx: ctx, Op: op}, done: make(chan Result[Res], 1)}
	start, ok := l.add(key, p)
	if !ok {
		return zero, ErrClosed
	}
	if start {
		go l.drain(key)
	}
	select {
	case r := <-p.done:
		return r.Value, r.Err
	case <-ctx.Done():
	}
	select {
	case r := <-p.done: // answered as the caller left
		return r.Value, r.Err
	default:
	}
	if p.state.CompareAndSwap(callQueued, callLeft) || p.state.Load() == callLeft {
		return zero, store.Wrap(store.CodeUnavailable, ctx.Err(), "%s: not attempted: the caller left while it queued", l.what(op))
	}
	return zero, &store.Error{Code: store.CodeUnavailable, Err: ctx.Err(), Uncertain: true,
		Message: l.what(op) + ": gave up waiting for its batch; it may have been applied, retry with the same key"}
}

// Close refuses calls from now on and waits until every lane has drained
// what was queued before.
func (l *Lanes[Op, Res]) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.wg.Wait()
}

// add queues p and reports whether the caller must start the lane's
// drainer; ok is false once the lanes are closed.
func (l *Lanes[Op, Res]) add(key string, p *pending[Op, Res]) (start, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return false, false
	}
	ln, running := l.m[key]
	if !running {
		ln = &lane[Op, Res]{arrived: make(chan struct{}, 1)}
		l.m[key] = ln
		l.wg.Add(1)
	}
	ln.q = append(ln.q, p)
	select {
	case ln.arrived <- struct{}{}:
	default:
	}
	return !running, true
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

// putBack returns calls a batch did not take on to the front of the lane,
// in order; the lane's drainer, which calls it, takes them next.
func (l *Lanes[Op, Res]) putBack(key string, calls []*pending[Op, Res]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.m[key]
	ln.q = append(calls[:len(calls):len(calls)], ln.q...)
}

// drain applies the lane's queued calls, batch after batch, until it is empty.
func (l *Lanes[Op, Res]) drain(key string) {
	defer l.wg.Done()
	last := 0 // size of the previous batch: how many callers may come back
	for {
		batch := l.take(key, last)
		if batch == nil {
			return
		}
		last = len(batch)
		live := batch[:0]
		for _, p := range batch {
			if p.call.Ctx.Err() == nil && p.state.CompareAndSwap(callQueued, callTaken) {
				live = append(live, p)
				continue
			}
			// The caller left before its batch: nothing was applied.
			p.state.Store(callLeft)
			p.done <- Result[Res]{Err: store.Wrap(store.CodeUnavailable, p.call.Ctx.Err(), "%s: not attempted", l.what(p.call.Op))}
		}
		if len(live) == 0 {
			continue
		}
		if rest := l.run(key, live); len(rest) > 0 {
			for _, p := range rest {
				p.state.Store(callQueued)
			}
			l.putBack(key, rest)
		}
	}
}

// run applies one batch, answers every call it applied (a failed batch:
// every call, with Unavailable; corrupt data and bugs stay Internal), and
// returns the calls it did not take on.
func (l *Lanes[Op, Res]) run(key string, live []*pending[Op, Res]) []*pending[Op, Res] {
	ctxs := make([]context.Context, len(live))
	for i, p := range live {
		ctxs[i] = p.call.Ctx
	}
	ctx, stop := Shared(ctxs, l.budget)
	defer stop()
	b := &Batch[Op, Res]{calls: live, answered: make([]bool, len(live))}
	err := l.apply(ctx, key, b)
	if err == nil && b.n == 0 {
		err = store.Errorf(store.CodeInternal, "a batch of %d calls answered none", len(live))
	}
	if err != nil {
		if store.CodeOf(err) != store.CodeInternal {
			err = &store.Error{Code: store.CodeUnavailable, Err: err, Uncertain: store.IsUncertain(err),
				Message: "the entitlement's batch did not commit"}
		}
		for i := range live {
			b.Answer(i, Result[Res]{Err: err})
		}
		return nil
	}
	var rest []*pending[Op, Res]
	for i, p := range live {
		if !b.answered[i] {
			rest = append(rest, p)
		}
	}
	return rest
}

// Shared is the context of work done once for several callers (a lane's
// batch transaction, a shared point read). The work serves every caller
// still waiting, so it must not end while one of them waits, nor run on for
// nobody: it ends when the last caller has left (cancelled, or past its
// deadline), and its deadline is the latest of theirs (capped at limit from
// now; limit itself when a caller has none), which the backend sees as the
// RPCs' deadline and the retry loop plans with. stop releases it.
func Shared(callers []context.Context, limit time.Duration) (ctx context.Context, stop func()) {
	deadline := time.Now().Add(limit)
	var latest time.Time
	bounded := len(callers) > 0
	for _, c := range callers {
		d, ok := c.Deadline()
		if !ok {
			bounded = false
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if bounded && latest.Before(deadline) {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	var waiting atomic.Int64
	waiting.Store(int64(len(callers)))
	stops := make([]func() bool, len(callers))
	for i, c := range callers {
		stops[i] = context.AfterFunc(c, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
