package firestore

import (
	"context"
	"sync"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
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

// walletsOf remembers the wallets each agent's last call found it a
// member of (entitlements.go sends its wallets' query on that guess).
type walletsOf struct {
	mu sync.Mutex
	m  map[string][]string
}

func (w *walletsOf) get(agentID string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.m[agentID]
}

// put records wallets (in memberships order) for agentID; an agent in no
// wallet is forgotten.
func (w *walletsOf) put(agentID string, wallets []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(wallets) == 0 {
		delete(w.m, agentID)
		return
	}
	if w.m == nil || len(w.m) >= maxOwners {
		w.m = make(map[string][]string)
	}
	w.m[agentID] = wallets
}

// members are the memberships of one wallet a transaction read, by member
// ID: each with the snapshot it is written back against (a nil membership
// is absent).
type members struct {
	walletID string
	m        map[string]*entitlement.Membership
	snaps    map[string]*firestore.DocumentSnapshot
	// asked maps the document ID of each membership asked for to its
	// member; written are the members whose membership is to be written.
	asked   map[string]string
	written map[string]bool
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

// touch marks for writing the memberships changed names and, if charged,
// that of agent: a membership a charge relied on is written back even
// unchanged, so that the charge commits only if the membership is still
// there (a member removed meanwhile is refused, not charged). It returns
// how many memberships it newly marked.
func (ms *members) touch(changed map[string]bool, agent string, charged bool) int {
	n := 0
	mark := func(id string) {
		if ms.m[id] == nil || ms.written[id] {
			return
		}
		if ms.written == nil {
			ms.written = map[string]bool{}
		}
		ms.written[id] = true
		n++
	}
	for id := range changed {
		mark(id)
	}
	if charged {
		mark(agent)
	}
	return n
}

// write writes back, guarded, the memberships touch marked.
func (ms *members) write(tx *firestore.Transaction) error {
	for id := range ms.written {
		if err := putGuarded(tx, ms.snaps[id], membershipDoc(ms.m[id])); err != nil {
			return err
		}
	}
	return nil
}

// chargedBy reports whether the outcome o charged or held something.
func chargedBy(o *outcome) bool {
	return o.err == nil && (o.consume.Outcome == store.Consumed || o.hold.Outcome == store.Held || o.hold.Outcome == store.Captured)
}

// agent is the caller of c (a consume's, a hold's, a capture's or a
// release's); "" for refunds and expiry, which name no caller.
func (c *call) agent() string {
	switch c.op {
	case opConsume:
		return c.consume.AgentID
	case opAuthorize:
		return c.hold.AgentID
	case opCapture, opRelease:
		return c.agentID
	}
	return ""
}

// agentsOf are the callers of calls.
func agentsOf(calls []*call) []string {
	out := make([]string, 0, len(calls))
	for _, c := range calls {
		if a := c.agent(); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// readMembers sets the batch's Members: the memberships in the
// entitlement's wallet of the calls' agents and of the members whose
// charges its refunds give back. snaps are those read with the entitlement
// for the owner this instance knew, if that was the owner (guessed).
func (b *batch) readMembers(ctx context.Context, calls []*call, snaps []*firestore.DocumentSnapshot, guessed bool) error {
	if !b.Found {
		return nil
	}
	b.s.owners.note(b.ID, b.E.AgentID)
	if guessed {
		if err := b.members.decode(snaps); err != nil {
			return err
		}
	} else {
		b.members = members{walletID: b.E.AgentID}
	}
	agents := agentsOf(calls)
	for _, c := range calls {
		if k := b.keys[c.key]; c.op == opRefund && k != nil && k.Cons != nil && k.Cons.WalletID != "" {
			agents = append(agents, k.Cons.AgentID)
		}
	}
	if err := b.members.read(ctx, b.s, agents...); err != nil {
		return err
	}
	b.Members = b.members.m
	return nil
}
