package firestore

import (
	"context"
	"math"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/firestore/internal/escrow"
)

// gatherIfNeeded folds every lease of the batch's entitlement when its
// calls need the exact balance (entitlement.Entitlement.NeedsGather): they
// may charge the last of what is free or need the leases' unspent part, a
// new quota period starts, or a quota refund must cap the remaining units
// at the limit. It runs before the batch writes anything (Firestore reads
// come before writes); the folded leases are written closed with the
// entitlement, so any lane still spending one reads it closed. Otherwise it
// folds the leases whose owner stopped renewing them (past their deadline,
// entitlement.OpenLease): the share of an instance that died.
func (b *batch) gatherIfNeeded(ctx context.Context, calls []*call) error {
	if !b.Found || len(b.E.Leases) == 0 {
		return nil
	}
	now := b.s.clock()
	if !b.E.NeedsGather(now, b.demand(calls)) {
		return b.foldExpired(ctx, now)
	}
	refs := b.s.leaseRefs(&b.E)
	snaps, err := b.s.readGuarded(ctx, refs...)
	if err != nil {
		return err
	}
	leases, err := leasesOf(snaps)
	if err != nil {
		return err
	}
	ptrs := make([]*entitlement.Lease, len(leases))
	for i := range leases {
		ptrs[i] = &leases[i]
	}
	if !b.E.Gather(ptrs) {
		return corruptLease(refs[0])
	}
	b.gathered, b.gatheredSnaps, b.gatheredAll, b.Changed = leases, snaps, true, true
	b.writes += len(leases)
	return nil
}

// foldExpired folds the entitlement's leases past their deadline at now,
// each with its document written closed (guarded: a lease its owner spends
// meanwhile fails this commit, which reads again).
func (b *batch) foldExpired(ctx context.Context, now time.Time) error {
	ids := b.E.ExpiredLeases(now)
	if len(ids) == 0 {
		return nil
	}
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = b.s.leaseRef(b.E.ID, id)
	}
	snaps, err := b.s.readGuarded(ctx, refs...)
	if err != nil {
		return err
	}
	leases, err := leasesOf(snaps)
	if err != nil {
		return err
	}
	for i := range leases {
		if !b.E.Fold(&leases[i]) {
			return corruptLease(refs[i])
		}
	}
	b.gathered, b.gatheredSnaps, b.Changed = leases, snaps, true
	b.writes += len(leases)
	return nil
}

// demand is the most the calls may charge or hold on the entitlement
// directly, in its unit (cents or units); a quota refund asks for a gather.
func (b *batch) demand(calls []*call) int64 {
	var n int64
	for _, c := range calls {
		switch c.op {
		case opConsume:
			n += amountOf(&b.E, c.consume)
		case opAuthorize:
			n += amountOf(&b.E, &c.hold.ConsumeRequest)
		case opCapture:
			if h := c.pre.Hold; h != nil && b.E.Type == entitlement.TypeCredits {
				n += h.MaxCost.Cents
			} else if h != nil {
				n += h.MaxUnits
			}
		case opRefund:
			if b.E.Type == entitlement.TypeQuota {
				return math.MaxInt64
			}
		}
	}
	return n
}

// amountOf is what r charges e, in e's unit.
func amountOf(e *entitlement.Entitlement, r *entitlement.ConsumeRequest) int64 {
	switch e.Type {
	case entitlement.TypeCredits:
		if r.Cost != nil {
			return r.Cost.Cents
		}
	case entitlement.TypeQuota:
		return max(r.Units, 1)
	}
	return 0
}

// gatherActive is gatherAll of the active ones of es: what a refund, a
// partial refund or a dispute folds before it changes their balances or
// revokes them, so no lease spends what was taken back.
func (s *Store) gatherActive(tx *firestore.Transaction, es []entitlement.Entitlement) (write func() error, err error) {
	var active []*entitlement.Entitlement
	for i := range es {
		if es[i].Status == entitlement.StatusActive {
			active = append(active, &es[i])
		}
	}
	return s.gatherAll(tx, active...)
}

// gatherAll reads, in tx, the open leases of each of es and folds them in
// (a revoke's gather: no lease of a revoked entitlement may charge again).
// It only reads; the returned write closes the folded leases, once the
// caller has done its other reads.
func (s *Store) gatherAll(tx *firestore.Transaction, es ...*entitlement.Entitlement) (write func() error, err error) {
	var refs []*firestore.DocumentRef
	var owners []*entitlement.Entitlement
	for _, e := range es {
		for _, ref := range s.leaseRefs(e) {
			refs, owners = append(refs, ref), append(owners, e)
		}
	}
	if len(refs) == 0 {
		return func() error { return nil }, nil
	}
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return nil, err
	}
	leases, err := leasesOf(snaps)
	if err != nil {
		return nil, err
	}
	for i := range leases {
		if !owners[i].Fold(&leases[i]) {
			return nil, corruptLease(refs[i])
		}
	}
	return func() error {
		for i := range leases {
			if err := tx.Set(refs[i], leaseDoc(&leases[i])); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// escrow.RecentWriter is how recent another instance's write of an entitlement
// must be for a hot lane to take a lease without having met contention.
// It only decides when to lease, never what is safe.

// leaseWish is what a lane asks of its next batch on the entitlement: off
// (never take a lease: leases are off, or the lane has one or is
// refilling), force (LeaseOptions.Force), lane (the lane leases already and
// needs a lease), want (the size to ask for; 0: from the batch), and the
// attempt of the transaction (a retry means another instance contends).
type leaseWish struct {
	// other: a batch of this instance saw another instance active lately.
	off, force, lane, other bool
	want, maxSize           int64
	attempt                 int
}

// leaseWish is the wish of lane ll (nil if none) of entitlementID for its
// next batch.
func (s *Store) leaseWish(entitlementID string, ll *escrow.Lane) leaseWish {
	w := leaseWish{off: s.leaseOpt.Off, force: s.leaseOpt.Force, maxSize: s.leaseOpt.MaxSize,
		other: s.leasing.SawOther(entitlementID)}
	if ll == nil && s.leasing.Releasing(entitlementID) {
		w.off = true // its release would miss a lease taken now
	}
	if ll == nil || w.off {
		return w
	}
	if ll.Busy() {
		w.off = true
		return w
	}
	w.lane, w.want = true, ll.WantSize(s.leaseOpt.MaxSize)
	return w
}

// takeLease takes a lease for this instance in the batch, after its calls
// (answered in out), when the lane asks for one, or when the batch is hot
// (several consumes, or one in a retry after contention) and another
// instance is active: this attempt is a retry after contention, another
// instance holds leases, or another instance wrote the entitlement
// recently (seen by this batch or a recent one). A lone instance never
// leases.
func (b *batch) takeLease(w leaseWish, out []outcome) {
	if w.off || !b.Found || b.E.Type == entitlement.TypeSubscription || b.E.Status != entitlement.StatusActive ||
		b.writes+1 > maxWrites {
		return
	}
	var consumes int
	var units, largest int64
	for i := range out {
		if c := out[i].consume; c.Outcome == store.Consumed {
			consumes++
			n := c.Consumption.Units
			if b.E.Type == entitlement.TypeCredits {
				n = c.Consumption.Cost.Cents
			}
			units += n
			largest = max(largest, n)
		}
	}
	other := len(b.E.Leases) > 0 || w.attempt > 1 ||
		(b.writer != "" && b.writer != b.s.owner && b.Now.Sub(b.writtenAt) < escrow.RecentWriter)
	b.other = other
	// A retry is contention right now: the entitlement is hot across
	// instances even if this batch holds one call.
	hot := consumes >= 2 || (consumes == 1 && w.attempt > 1)
	if !w.lane && !(w.force && consumes > 0) && !(hot && (other || w.other)) {
		return
	}
	want := w.want
	if want == 0 {
		want = max(4096*largest, 256*units)
		if w.maxSize > 0 {
			want = min(want, w.maxSize)
		}
	}
	n := b.E.LeaseSize(b.Now, want)
	if n <= 0 {
		return
	}
	l := b.E.TakeLease(uuid.NewString(), b.s.owner, n, b.Now.Add(b.s.leaseOpt.TTL))
	b.took, b.Changed = &l, true
	b.writes++
}

// writtenDoc is e's document as this instance writes it at now: with the
// writer, so other instances see that this one is active.
func (s *Store) writtenDoc(e *entitlement.Entitlement, now time.Time) map[string]any {
	d := entitlementDoc(e)
	d["writer"] = map[string]any{"owner": s.owner, "at": now}
	return d
}

// writerOf reads the writer of an entitlement's document.
func writerOf(snap *firestore.DocumentSnapshot) (owner string, at time.Time) {
	f := read(snap)
	if t := f.optInstant("writer.at"); t != nil {
		at = *t
	}
	return f.optStr("writer.owner"), at
}
