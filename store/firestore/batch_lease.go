package firestore

import (
	"math"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
)

// gatherIfNeeded folds every lease of the batch's entitlement when its
// calls need the exact balance (entitlement.Entitlement.NeedsGather): they
// may charge the last of what is free or need the leases' unspent part, a
// new quota period starts, or a quota refund must cap the remaining units
// at the limit. It runs before the batch writes anything (Firestore reads
// come before writes); the folded leases are written closed with the
// entitlement, so any lane still spending one reads it closed.
func (b *batch) gatherIfNeeded(calls []*call) error {
	if !b.found || len(b.e.Leases) == 0 || !b.e.NeedsGather(b.s.clock(), b.demand(calls)) {
		return nil
	}
	refs := b.s.leaseRefs(&b.e)
	snaps, err := b.tx.GetAll(refs)
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
	if !b.e.Gather(ptrs) {
		return corruptLease(refs[0])
	}
	b.gathered, b.changed = leases, true
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
			n += amountOf(&b.e, c.consume)
		case opAuthorize:
			n += amountOf(&b.e, &c.hold.ConsumeRequest)
		case opCapture:
			if h := c.pre.Hold; h != nil && b.e.Type == entitlement.TypeCredits {
				n += h.MaxCost.Cents
			} else if h != nil {
				n += h.MaxUnits
			}
		case opRefund:
			if b.e.Type == entitlement.TypeQuota {
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
