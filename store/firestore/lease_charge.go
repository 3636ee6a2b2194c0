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
// the lease, the calls' key documents and, for the calls of a wallet's
// members, their memberships (beside the transaction; the lease and the
// memberships are written back guarded, the consumptions created:
// guard.go; never the entitlement), charges each call the lease and the
// member's caps fit
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
		nkeys := len(order)
		ms := &members{walletID: ent.AgentID}
		refs = append(refs, ms.refs(s, agentsOf(calls)...)...)
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
		if err := ms.decode(snaps[1+nkeys:]); err != nil {
			return err
		}
		var events []charge.Event
		for _, snap := range snaps[1 : 1+nkeys] {
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
			m, payer := ms.m[c.consume.AgentID], ent.AgentID == c.consume.AgentID
			if writes := 1 + len(taken) + len(ms.written) + len(events); writes+callWrites+memberWrites > maxWrites {
				left = append(left, c) // past one commit's writes: the next batch's
				continue
			}
			if !payer && m == nil {
				answers = append(answers, outcome{consume: charge.DeniedBy(ll.ID(), entitlement.ReasonNotFound)})
				taken = append(taken, c)
				continue
			}
			// Charged on a copy of the lease: a member's caps are checked
			// after the entitlement's own reasons, as the engine does.
			next := lease
			cons, reason, fits := ent.ChargeLease(now, &next, c.consume, k.ref.ID, c.fingerprint)
			var limit string
			if fits && reason == "" && m != nil {
				limit = m.Check(now, &ent, c.consume)
			}
			switch {
			case !fits:
				left = append(left, c)
				continue
			case reason != "":
				answers = append(answers, outcome{consume: charge.DeniedBy(ll.ID(), reason)})
			case limit != "":
				answers = append(answers, outcome{consume: charge.Denied([]entitlement.Denial{entitlement.MemberDenial(ll.ID(), m.MemberID, limit)})})
			default:
				lease = next
				if m != nil {
					_, charged := charge.MemberCharged(m, now, &ent, &cons)
					events = append(events, charged...)
					ms.touch(nil, m.MemberID, true) // written back even unchanged (members.go)
				}
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
		if err := ms.write(tx); err != nil {
			return err
		}
		for _, ev := range events {
			if err := s.enqueue(tx, ev.Type, ev.AgentID, now, ev.Data); err != nil {
				return err
			}
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
