package firestore

import (
	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// A lease (entitlement/lease.go) lives in the top-level collection "leases",
// as {entitlement}_{lease} (the lease ID is random). Its entitlement keeps
// the registry of open leases in "leases" (id and limit of each). A closed
// lease document stays, with closed set: a lane whose lease was folded by
// another instance reads that and stops spending.
//
// Not a subcollection of the entitlement: on the emulator, the instances'
// lease batches under one entitlement's document slowed each other down (a
// lease batch took 27 ms, against 22 ms on an entitlement of its own in the
// same run; top-level, 20 against 17 ms: docs/bench/firestore.md).
// Production Firestore locks single documents, so there the place is only a
// name.

// colLeases is the collection of every entitlement's leases.
const colLeases = "leases"

func (s *Store) leaseRef(entitlementID, leaseID string) *firestore.DocumentRef {
	return s.col(colLeases).Doc(entitlementID + "_" + leaseID)
}

func leaseDoc(l *entitlement.Lease) map[string]any {
	d := map[string]any{
		"id":            l.ID,
		"entitlementId": l.EntitlementID,
		"owner":         l.Owner,
		"limit":         l.Limit,
		"spent":         l.Spent,
		"base":          l.Base,
		"closed":        l.Closed,
	}
	if !l.Period.IsZero() {
		d["period"] = stamp(l.Period)
	}
	return d
}

func leaseFrom(snap *firestore.DocumentSnapshot) (entitlement.Lease, error) {
	f := read(snap)
	l := entitlement.Lease{
		ID:            f.str("id"),
		EntitlementID: f.str("entitlementId"),
		Owner:         f.str("owner"),
		Limit:         f.integer("limit"),
		Spent:         f.integer("spent"),
		Base:          f.integer("base"),
		Closed:        f.boolean("closed"),
	}
	if p := f.optInstant("period"); p != nil {
		l.Period = *p
	}
	if f.err == nil && (l.Spent < 0 || l.Spent > l.Limit) {
		f.corrupt("spent", "spent %d outside [0, limit %d]", l.Spent, l.Limit)
	}
	return l, f.err
}

// putLeases stores the open-lease registry; with no open lease it is not
// stored.
func putLeases(d map[string]any, leases []entitlement.OpenLease) {
	if len(leases) == 0 {
		return
	}
	list := make([]any, len(leases))
	for i, o := range leases {
		m := map[string]any{"id": o.ID, "limit": o.Limit}
		if !o.Until.IsZero() {
			m["until"] = o.Until
		}
		list[i] = m
	}
	d["leases"] = list
}

// leasesFrom decodes the registry of f into e.
func leasesFrom(f *fields, e *entitlement.Entitlement) {
	f.each("leases", func(l *fields) {
		o := entitlement.OpenLease{ID: l.str("id"), Limit: l.integer("limit")}
		if t := l.optInstant("until"); t != nil {
			o.Until = *t
		}
		if l.err == nil && o.Limit <= 0 {
			l.corrupt("limit", "lease limit %d", o.Limit)
		}
		e.Leases = append(e.Leases, o)
	})
}

// leaseRefs are the documents of e's open leases.
func (s *Store) leaseRefs(e *entitlement.Entitlement) []*firestore.DocumentRef {
	refs := make([]*firestore.DocumentRef, len(e.Leases))
	for i, o := range e.Leases {
		refs[i] = s.leaseRef(e.ID, o.ID)
	}
	return refs
}

// leasesOf decodes lease documents; a missing one is corruption (the
// registry names only leases whose document its transaction created).
func leasesOf(snaps []*firestore.DocumentSnapshot) ([]entitlement.Lease, error) {
	out := make([]entitlement.Lease, 0, len(snaps))
	for _, snap := range snaps {
		if !snap.Exists() {
			return nil, corruptLease(snap.Ref)
		}
		l, err := leaseFrom(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// corruptLease is the error of a registered lease without its document.
func corruptLease(ref *firestore.DocumentRef) error {
	return store.Errorf(store.CodeInternal, "corrupt data: the entitlement registers lease %s, which is missing", docPath(ref))
}
