package firestore

import (
	"context"
	"sync"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
)

// A member's charge to a wallet's entitlement reads its membership (the
// caps and the member's counters) in the charge's transaction and writes it
// back, guarded (guard.go), when the charge changed it: in the batch on the
// entitlement (batch.go, with the charge engine's Batch.Members) and in a
// lease batch (lease_charge.go). Each membership is one member's, so a
// member's calls contend only with its own calls on other instances.
//
// Its document's ID names the wallet, the entitlement's owner, which the
// batch reads in the same GetAll: an entitlement's owner never changes, so
// the store remembers the owners of the entitlements it has read (owners),
// and a batch on one it has not read yet reads the memberships after it.

// owners remembers the agent (or wallet) of each entitlement this instance
// has read.
type owners struct {
	mu sync.Mutex
	m  map[string]string
}

// maxOwners bounds owners: past it, it starts again (a hot entitlement is
// read again at once).
const maxOwners = 100_000

func (o *owners) note(entitlementID, agentID string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil || len(o.m) >= maxOwners {
		o.m = make(map[string]string)
	}
	o.m[entitlementID] = agentID
}

func (o *owners) of(entitlementID string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.m[entitlementID]
	return a, ok
}

// members are the memberships of one wallet a transaction read, by member
// ID: each with the snapshot it is written back against (a nil membership
// is absent).
type members struct {
	walletID string
	m        map[string]*entitlement.Membership
	snaps    map[string]*firestore.DocumentSnapshot
	// asked maps the document ID of each membership asked for to its
	// member.
	asked map[string]string
}

// refs returns the membership documents to read for the callers agents:
// those that are not the wallet (its own calls) and not read yet.
func (ms *members) refs(s *Store, agents ...string) []*firestore.DocumentRef {
	var refs []*firestore.DocumentRef
	for _, a := range agents {
		if a == "" || a == ms.walletID {
			continue
		}
		ref := s.membershipRef(ms.walletID, a)
		if _, ok := ms.asked[ref.ID]; ok {
			continue
		}
		if ms.asked == nil {
			ms.asked = map[string]string{}
		}
		ms.asked[ref.ID] = a
		refs = append(refs, ref)
	}
	return refs
}

// decode records the membership documents snaps, read for refs.
func (ms *members) decode(snaps []*firestore.DocumentSnapshot) error {
	if ms.m == nil {
		ms.m, ms.snaps = map[string]*entitlement.Membership{}, map[string]*firestore.DocumentSnapshot{}
	}
	for _, snap := range snaps {
		id := ms.asked[snap.Ref.ID]
		ms.snaps[id] = snap
		if !snap.Exists() {
			continue
		}
		m, err := membershipFrom(snap)
		if err != nil {
			return err
		}
		ms.m[id] = &m
	}
	return nil
}

// read reads the memberships of agents ms has not read, in one GetAll.
func (ms *members) read(ctx context.Context, s *Store, agents ...string) error {
	refs := ms.refs(s, agents...)
	if len(refs) == 0 {
		return nil
	}
	snaps, err := s.readGuarded(ctx, refs...)
	if err != nil {
		return err
	}
	return ms.decode(snaps)
}

// write writes back, guarded, the memberships ids that changed.
func (ms *members) write(tx *firestore.Transaction, ids []string) error {
	for _, id := range ids {
		m := ms.m[id]
		if m == nil {
			continue // absent: nothing to count on
		}
		if err := putGuarded(tx, ms.snaps[id], membershipDoc(m)); err != nil {
			return err
		}
	}
	return nil
}
