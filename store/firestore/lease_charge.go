package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/firestore/internal/escrow"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// leaseCharge charges what it can of calls on this instance's leases of the
// entitlement and answers those calls; it returns the others, in order, for
// the entitlement's own batch: every call but a consume, and the consumes
// no lease fits.
func (s *Store) leaseCharge(ctx context.Context, entitlementID string, calls []*call) []*call {
	ll := s.leasing.Lane(entitlementID)
	if ll == nil {
		return calls
	}
	ll.Used() // not idle: calls keep coming
	var consumes, rest []*call
	for _, c := range calls {
		if c.op == opConsume {
			consumes = append(consumes, c)
		} else {
			rest = append(rest, c)
		}
	}
	// Three leases at most: the active one, then the next ones if the
	// active one runs dry on the way. A lane out of leases with a refill
	// on its way waits for it: on the entitlement, its calls would contend
	// with the other instances.
	for range 3 {
		if len(consumes) == 0 {
			break
		}
		id := ll.Current()
		if id == "" && !ll.AwaitRefill(ctx) {
			break
		}
		if id == "" {
			if id = ll.Current(); id == "" {
				break
			}
		}
		left, dry, err := s.runLeaseBatch(ctx, ll, id, consumes)
		if err != nil {
			for _, c := range consumes {
				c.answer(outcome{err: err})
			}
			consumes = nil
			break
		}
		if dry {
			ll.Retire(id)
		}
		consumes = left
	}
	s.maybeRefill(ll)
	return append(consumes, rest...)
}

// runLeaseBatch is one transaction of consumes on lease leaseID: it reads
// the lease and the calls' key documents (beside the transaction; the lease
// is written back guarded, the consumptions created: guard.go), charges
// each call the lease fits
// (a replay or conflict for a key already used, a denial for a reason that
// does not depend on the balance), writes the lease and the new
// consumptions, and answers those calls. It returns the calls it left
// (the lease does not fit them), and dry when the lease is closed or fits
// none of them.
func (s *Store) runLeaseBatch(ctx context.Context, ll *escrow.Lane, leaseID string, calls []*call) (left []*call, dry bool, err error) {
	ent := ll.Ent()
	var (
		answers []outcome
		taken   []*call
		lease   entitlement.Lease
		largest int64
		charged int64
	)
	err = s.runGuarded(ctx, "lease batch", func(ctx context.Context, tx *firestore.Transaction) error {
		answers, taken, left, largest, charged = nil, nil, nil, 0, 0
		ref := s.leaseRef(ll.ID(), leaseID)
		refs := []*firestore.DocumentRef{ref}
		keys := map[string]*batchKey{}
		var order []*batchKey
		for _, c := range calls {
			if keys[c.key] == nil {
				k := &batchKey{ref: s.col(colConsumptions).Doc(c.key)}
				keys[c.key] = k
				order = append(order, k)
				refs = append(refs, k.ref)
			}
		}
		snaps, err := s.readGuarded(ctx, refs...)
		if err != nil {
			return err
		}
		if !snaps[0].Exists() {
			return corruptLease(ref)
		}
		if lease, err = leaseFrom(snaps[0]); err != nil {
			return err
		}
		for _, snap := range snaps[1:] {
			k := keys[snap.Ref.ID]
			if k.stored = snap.Exists(); k.stored {
				if k.keyDoc, err = keyFrom(snap); err != nil {
					return err
				}
			}
		}
		now := s.clock() // after the reads: see instantAfterReads
		for _, c := range calls {
			k := keys[c.key]
			if !k.Unused() {
				answers, taken = append(answers, outcome{consume: charge.ReplayOf(k.Used(now), c.consume)}), append(taken, c)
				continue
			}
			if ent.AgentID != c.consume.AgentID {
				answers = append(answers, outcome{consume: charge.DeniedBy(ll.ID(), entitlement.ReasonNotFound)})
				taken = append(taken, c)
				continue
			}
			cons, reason, fits := ent.ChargeLease(now, &lease, c.consume, k.ref.ID, c.fingerprint)
			switch {
			case !fits:
				left = append(left, c)
				continue
			case reason != "":
				answers = append(answers, outcome{consume: charge.DeniedBy(ll.ID(), reason)})
			default:
				k.Cons, k.written = &cons, true
				amount := cons.Units
				if cons.EntitlementType == entitlement.TypeCredits {
					amount = cons.Cost.Cents
				}
				charged += amount
				largest = max(largest, amount)
				answers = append(answers, outcome{consume: store.ConsumeResult{Outcome: store.Consumed,
					Consumption: cons, Entitlement: estimate(&ent, &cons, now)}})
			}
			taken = append(taken, c)
		}
		if charged == 0 {
			return nil // nothing to write
		}
		if err := putGuarded(tx, snaps[0], leaseDoc(&lease)); err != nil {
			return err
		}
		for _, k := range order {
			if k.written {
				if err := tx.Create(k.ref, keyDocument(&k.keyDoc)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		if store.CodeOf(err) != store.CodeInternal {
			err = &store.Error{Code: store.CodeUnavailable, Err: err, Uncertain: store.IsUncertain(err),
				Message: "the batch of calls on the entitlement's lease did not commit"}
		}
		return nil, false, err
	}
	s.counters.leaseBatches.Add(1)
	for i, c := range taken {
		c.answer(answers[i])
	}
	ll.Charged(leaseID, charged, largest, lease.Left(), lease.Limit)
	return left, lease.Closed || len(left) == len(calls), nil
}

// estimate is the entitlement as a lease charge's answer shows it: the
// lane's copy with the consumption's estimated balance or remaining quota
// (entitlement.Entitlement.ChargeLease), and no holds or leases: the exact
// state is what a read shows.
func estimate(ent *entitlement.Entitlement, cons *entitlement.Consumption, now time.Time) entitlement.Entitlement {
	e := ent.Clone()
	e.Holds, e.Leases = nil, nil
	switch e.Type {
	case entitlement.TypeCredits:
		e.Credits.Balance = cons.BalanceAfter
	case entitlement.TypeQuota:
		e.Quota.Remaining = *cons.RemainingAfter
	}
	e.Refresh(now)
	return e
}
