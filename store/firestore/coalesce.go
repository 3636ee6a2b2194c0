package firestore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// A hot entitlement (an agent running many tool calls in parallel) would
// turn into many transactions on one document: on Firestore they wait on
// each other's locks and abort, and one document only takes a modest
// sustained write rate. So the calls on one entitlement queue in a lane,
// and one goroutine per busy lane applies whatever has queued as one batch,
// in one transaction (applyBatch). While a batch commits, the next one
// gathers, so batches grow with the load and no timer delays a lone call.
// Between instances, batches contend like ordinary transactions and are
// retried with jittered backoff (Store.run).

// op is what a queued call does to its entitlement. Every change of an
// entitlement's balance, quota or holds but a revoke goes through its lane,
// so a hot entitlement takes its consumes, holds, captures, releases and
// refunds in the same few transactions.
type op int

const (
	opConsume op = iota
	opAuthorize
	opCapture
	opRelease
	opRefund
	opExpire
)

// what names the operation in errors.
func (o op) what() string {
	return [...]string{"consume", "authorize", "capture hold", "release hold", "refund consumption", "expire holds"}[o]
}

// call is one queued operation on an entitlement.
type call struct {
	ctx context.Context
	op  op
	// key is the ID of the consumptions document the call is about: its
	// idempotency key's (consume, authorize), or the hold's or
	// consumption's (capture, release, refund); "" for expire.
	key         string
	consume     *entitlement.ConsumeRequest // consume
	hold        *entitlement.HoldRequest    // authorize
	fingerprint string                      // consume, authorize: the request's
	agentID     string                      // capture, release: the caller's agent
	amount      entitlement.Amount          // capture, refund
	// pre is the hold as read before the call queued (capture, release):
	// open then, and all but its status never changes.
	pre *keyDoc
	// fence is the fence of ctx (refund), checked and marked in the batch
	// if the call changes something (fence.go).
	fence txFence
	done  chan outcome // buffered: the drainer never blocks on a caller
	// state says whether a batch took the call on (callTaken) or its
	// caller left before any did (callLeft): only then is a caller who
	// leaves sure that nothing was done.
	state atomic.Int32
}

// The states of a call: queued, then taken on by a batch, or left by its
// caller (past its deadline, or gone) before a batch took it on; a batch
// that does not take on a call it read puts it back, queued.
const (
	callQueued int32 = iota
	callTaken
	callLeft
)

// outcome is a call's answer: the field of its op, or err (which fails
// this call only; a batch that does not commit fails all its calls).
type outcome struct {
	consume store.ConsumeResult
	hold    store.HoldResult
	refund  store.RefundResult
	ended   int // expire: the holds the batch ended
	err     error
}

// lanes holds the queued calls per entitlement ID. A present lane means a
// drainer goroutine owns it.
type lanes struct {
	mu sync.Mutex
	m  map[string]*lane
}

type lane struct {
	q       []*call
	arrived chan struct{} // signalled (without blocking) on every add
}

// add queues c and reports whether the caller must start the lane's drainer.
func (l *lanes) add(id string, c *call) (start bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = make(map[string]*lane)
	}
	ln, running := l.m[id]
	if !running {
		ln = &lane{arrived: make(chan struct{}, 1)}
		l.m[id] = ln
	}
	ln.q = append(ln.q, c)
	select {
	case ln.arrived <- struct{}{}:
	default:
	}
	return !running
}

// take removes up to n queued calls; with none left it closes the lane and
// returns nil, so the next add starts a new drainer. If fewer than want are
// queued, it first waits up to gather for more: on a hot lane the callers
// of the last batch come back nearly together, and without this pause the
// first of them would ride alone in a transaction while the rest wait.
func (l *lanes) take(id string, n, want int, gather time.Duration) []*call {
	l.mu.Lock()
	ln := l.m[id]
	if len(ln.q) == 0 {
		delete(l.m, id)
		l.mu.Unlock()
		return nil
	}
	if len(ln.q) < min(want, n) && gather > 0 {
		l.mu.Unlock()
		timer := time.NewTimer(gather)
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
		ln.q = make([]*call, 0, 8) // drop the old array; the lane stays open
	} else {
		ln.q = ln.q[k:]
	}
	return batch
}

// putBack returns calls a batch did not take on to the front of the lane,
// in order; the lane's drainer, which calls it, takes them next.
func (l *lanes) putBack(id string, calls []*call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ln := l.m[id]
	ln.q = append(calls[:len(calls):len(calls)], ln.q...)
}

// queue queues c on the lane of entitlementID and waits for its own
// answer.
func (s *Store) queue(entitlementID string, c *call) outcome {
	c.done = make(chan outcome, 1)
	if s.lanes.add(entitlementID, c) {
		go s.drain(entitlementID)
	}
	select {
	case o := <-c.done:
		return o
	case <-c.ctx.Done():
	}
	select {
	case o := <-c.done: // answered as the caller left
		return o
	default:
	}
	if c.state.CompareAndSwap(callQueued, callLeft) || c.state.Load() == callLeft {
		return outcome{err: store.Wrap(store.CodeUnavailable, c.ctx.Err(), "%s: not attempted: the caller left while it queued", c.op.what())}
	}
	return outcome{err: &store.Error{Code: store.CodeUnavailable, Err: c.ctx.Err(), Uncertain: true,
		Message: c.op.what() + ": gave up waiting for its batch; the call may have been applied, retry it"}}
}

// drain applies the lane's queued calls, batch after batch, until it is empty.
func (s *Store) drain(entitlementID string) {
	last := 0 // size of the previous batch: how many callers may come back
	for {
		batch := s.lanes.take(entitlementID, s.maxBatch, last, s.gather)
		if batch == nil {
			return
		}
		last = len(batch)
		live := batch[:0]
		for _, c := range batch {
			if c.ctx.Err() == nil && c.state.CompareAndSwap(callQueued, callTaken) {
				live = append(live, c)
				continue
			}
			// The caller left before its batch: nothing was done.
			c.state.Store(callLeft)
			c.done <- outcome{err: store.Wrap(store.CodeUnavailable, c.ctx.Err(), "%s: not attempted", c.op.what())}
		}
		if len(live) == 0 {
			continue
		}
		rest := s.leaseCharge(entitlementID, live)
		if len(rest) == 0 {
			continue
		}
		if n := s.runDirect(entitlementID, rest); n < len(rest) {
			for _, c := range rest[n:] {
				c.state.Store(callQueued)
			}
			s.lanes.putBack(entitlementID, rest[n:])
		}
	}
}

// runBatch runs one batch's transaction, answers the calls it took on
// (all but those past the write limit, see applyBatch) and returns how many
// those are. If the transaction fails, every call fails with Unavailable
// (corrupt data stays Internal). Nothing of the batch was written then,
// unless the commit's answer was lost (the error is Uncertain): a retry of
// a keyed call replays or applies it, either way once.
func (s *Store) runBatch(entitlementID string, calls []*call, w leaseWish) (int, directInfo, bool) {
	// The batch serves all its callers: it runs until the last of them
	// leaves, within the latest of their deadlines and the retry budget.
	ctxs := make([]context.Context, len(calls))
	for i, c := range calls {
		ctxs[i] = c.ctx
	}
	ctx, stop := sharedContext(ctxs, s.retryBudget)
	defer stop()
	var (
		results  []outcome
		b        *batch
		attempts int
	)
	err := s.runGuarded(ctx, "batch on entitlement", func(ctx context.Context, tx *firestore.Transaction) error {
		var err error
		attempts++
		w.attempt = attempts
		results, b, err = s.applyBatch(ctx, tx, entitlementID, calls, w)
		return err
	})
	if err != nil {
		if store.CodeOf(err) != store.CodeInternal {
			err = &store.Error{Code: store.CodeUnavailable, Err: err, Uncertain: store.IsUncertain(err),
				Message: "the batch of calls on the entitlement did not commit"}
		}
		for _, c := range calls {
			c.done <- outcome{err: err}
		}
		return len(calls), directInfo{}, false
	}
	for i := range results {
		calls[i].done <- results[i]
	}
	info := directInfo{e: b.e, found: b.found, gathered: len(b.gathered) > 0, took: b.took, other: b.other}
	s.counters.batches.Add(1)
	if info.gathered {
		s.counters.gathers.Add(1)
	}
	return len(results), info, true
}

// runDirect runs calls in a batch on the entitlement itself (runBatch),
// ordered after the lane's other transactions on the entitlement, and
// updates the lane's leases after it (afterDirect). It returns how many
// calls the batch took on.
func (s *Store) runDirect(entitlementID string, calls []*call) int {
	ll := s.leasing.lane(entitlementID)
	if ll != nil {
		ll.tx.Lock()
		defer ll.tx.Unlock()
	}
	n, info, ok := s.runBatch(entitlementID, calls, s.leaseWish(entitlementID, ll))
	if ok {
		s.afterDirect(ll, info)
	}
	return n
}
