package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/coalesce"
)

// A hot entitlement (an agent running many tool calls in parallel) would
// turn into many transactions on one document: on Firestore they wait on
// each other's locks and abort, and one document only takes a modest
// sustained write rate. So the calls on one entitlement queue in a lane of
// the shared coalescer (store/internal/coalesce), whose batches this file
// runs: on the instance's leases where they fit (lease_charge.go), else in
// one transaction on the entitlement (applyBatch, batch.go). Between
// instances, batches contend like ordinary transactions and are retried
// with jittered backoff (Store.run).

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
	// answer answers the call; set by the batch that runs it (applyLane).
	answer func(outcome)
}

// outcome is a call's answer: the field of its op, or err (which fails
// this call only; a batch that does not commit fails all its calls).
type outcome struct {
	consume store.ConsumeResult
	hold    store.HoldResult
	refund  store.RefundResult
	ended   int // expire: the holds the batch ended
	err     error
}

// newLanes returns the store's lanes (store/internal/coalesce).
func (s *Store) newLanes() *coalesce.Lanes[*call, outcome] {
	return coalesce.New(s.applyLane, coalesce.Options[*call]{MaxBatch: s.maxBatch, Gather: s.gather,
		Budget: s.retryBudget, What: func(c *call) string { return c.op.what() }})
}

// queue queues c on the lane of entitlementID and waits for its own
// answer.
func (s *Store) queue(entitlementID string, c *call) outcome {
	o, err := s.lanes.Do(c.ctx, entitlementID, c)
	if err != nil {
		return outcome{err: err}
	}
	return o
}

// applyLane is the lanes' Apply: it charges what this instance's leases of
// the entitlement fit (leaseCharge), then runs the rest in a batch on the
// entitlement itself. Calls past one commit's writes stay unanswered and
// queue again.
func (s *Store) applyLane(ctx context.Context, entitlementID string, lb *coalesce.Batch[*call, outcome]) error {
	calls := make([]*call, lb.Len())
	for i := range calls {
		c := lb.Op(i)
		c.answer = func(o outcome) { lb.Answer(i, coalesce.Result[outcome]{Value: o}) }
		calls[i] = c
	}
	if rest := s.leaseCharge(ctx, entitlementID, calls); len(rest) > 0 {
		s.runDirect(ctx, entitlementID, rest)
	}
	return nil
}

// runBatch runs one batch's transaction, answers the calls it took on
// (all but those past the write limit, see applyBatch) and returns how many
// those are. If the transaction fails, every call fails with Unavailable
// (corrupt data stays Internal). Nothing of the batch was written then,
// unless the commit's answer was lost (the error is Uncertain): a retry of
// a keyed call replays or applies it, either way once.
func (s *Store) runBatch(ctx context.Context, entitlementID string, calls []*call, w leaseWish) (int, directInfo, bool) {
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
			c.answer(outcome{err: err})
		}
		return len(calls), directInfo{}, false
	}
	for i := range results {
		calls[i].answer(results[i])
	}
	info := directInfo{e: b.E, found: b.Found, gathered: b.gatheredAll, took: b.took, other: b.other}
	s.counters.batches.Add(1)
	if !b.gatheredAll {
		s.counters.expired.Add(int64(len(b.gathered)))
	}
	if info.gathered {
		s.counters.gathers.Add(1)
	}
	return len(results), info, true
}

// runDirect runs calls in a batch on the entitlement itself (runBatch),
// ordered after the lane's other transactions on the entitlement, and
// updates the lane's leases after it (afterDirect). It returns how many
// calls the batch took on.
func (s *Store) runDirect(ctx context.Context, entitlementID string, calls []*call) int {
	ll := s.leasing.Lane(entitlementID)
	if ll != nil {
		ll.Tx.Lock()
		defer ll.Tx.Unlock()
	}
	n, info, ok := s.runBatch(ctx, entitlementID, calls, s.leaseWish(entitlementID, ll))
	if ok {
		s.afterDirect(ll, info)
	}
	return n
}
