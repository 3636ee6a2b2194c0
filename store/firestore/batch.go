package firestore

import (
	"context"
	"slices"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// maxWrites is the most writes one Firestore commit takes.
const maxWrites = 500

// callWrites is the most writes one call adds to a batch: its document and
// one event (entitlement.depleted, consumption.refunded); memberWrites
// what a member's call on a wallet's entitlement may add: its membership
// and wallet.member_limit_reached.
const (
	callWrites   = 2
	memberWrites = 2
)

// batch is one attempt of a lane's transaction: the entitlement and the
// documents of the calls' keys as read, and what the calls have done to
// them so far. Every document is changed here in memory and written at
// most once, at the end: one write per document per commit, however many
// calls (and the batch's own expiry) touch it, which keeps the count
// against the commit's 500 writes exact.
type batch struct {
	// Batch is the charge engine's state: the entitlement as read and
	// changed (E, Found, Changed), the instant (Now) and its events.
	charge.Batch
	s      *Store
	tx     *firestore.Transaction
	entRef *firestore.DocumentRef
	// entSnap is the entitlement's document as read, outside the
	// transaction: the batch writes it back guarded (guard.go).
	entSnap *firestore.DocumentSnapshot
	keys    map[string]*batchKey
	order   []*batchKey // the keys in the order they were read
	// ended are the holds this batch ended by expiry whose documents no
	// call reads, to be marked without reading them.
	ended  []entitlement.OpenHold
	writes int
	// expiredByBatch is how many holds the batch ended by expiry, for the
	// first expire call.
	expiredByBatch int
	// fences are the fenced calls' ledger rows as read, by document path;
	// marked are those whose mark the batch has written.
	fences map[string]*fenced
	marked map[string]bool
	// gathered are the leases the batch folded (gather.go), to be
	// written closed; took is the lease it took for this instance.
	gathered      []entitlement.Lease
	gatheredSnaps []*firestore.DocumentSnapshot
	// gatheredAll: gathered is every lease (not only expired ones).
	gatheredAll bool
	took        *entitlement.Lease
	// writer and writtenAt are the instance that last wrote the
	// entitlement, and when (gather.go).
	writer    string
	writtenAt time.Time
	// other: the batch saw another instance active (takeLease).
	other bool
	// members are the memberships of the calls' agents in the
	// entitlement's wallet (members.go); Batch.Members holds them.
	members members
}

// batchKey is one consumptions document in a batch.
type batchKey struct {
	ref *firestore.DocumentRef
	// snap is the document as the batch read it (nil: known from before
	// the call queued, see readBatch), for its guarded write.
	snap    *firestore.DocumentSnapshot
	stored  bool // it existed before the batch
	written bool // the batch changed it: written at the end
	keyDoc
}

// applyBatch is the body of one transaction for calls on one entitlement:
// it reads the entitlement and the document of every call's key at once,
// ends the entitlement's expired holds, applies the calls in order on the
// entitlement in memory (a key seen earlier in the batch, or stored, is a
// replay or conflict of what it names), then writes each changed document
// once. It answers the first calls that fit in one commit's writes and
// leaves the rest for the next batch: the answers are as many as the calls
// it took on. It only computes from what it reads, so it may run more than
// once.
func (s *Store) applyBatch(ctx context.Context, tx *firestore.Transaction, entitlementID string, calls []*call, w leaseWish) ([]outcome, *batch, error) {
	b, err := s.readBatch(ctx, tx, entitlementID, calls)
	if err != nil {
		return nil, nil, err
	}
	out := make([]outcome, 0, len(calls))
	for _, c := range calls {
		need := callWrites
		if c.fence != nil {
			need++ // its fence's mark
		}
		if b.Found && c.agent() != b.E.AgentID {
			need += memberWrites
		}
		if len(out) > 0 && b.writes+need > maxWrites {
			break
		}
		o, err := b.apply(c)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, o)
	}
	b.takeLease(w, out)
	return out, b, b.write()
}

// readBatch reads the batch's documents, beside the transaction (each one
// it writes is written back guarded, guard.go), and ends the entitlement's
// expired holds.
//
// A capture or release comes with its hold as read before it queued (open
// then). While the entitlement's registry, as this batch read it, still
// holds the hold, the hold is open now too, and so the document is what
// that read saw: every transaction that ends a hold also removes it from
// the registry, so it conflicts with this one (this batch's guarded write
// of the entitlement fails, and the batch reads again). Those documents are then not
// read again (on the emulator, reading existing documents is most of a
// transaction's cost); only a hold that has ended meanwhile is read, in a
// second read.
func (s *Store) readBatch(ctx context.Context, tx *firestore.Transaction, entitlementID string, calls []*call) (*batch, error) {
	b := &batch{s: s, tx: tx, entRef: s.entitlementRef(entitlementID), keys: make(map[string]*batchKey, len(calls))}
	b.ID = entitlementID
	refs := []*firestore.DocumentRef{b.entRef}
	for _, c := range calls {
		if c.key != "" && c.pre == nil && b.keys[c.key] == nil {
			refs = append(refs, b.key(c.key).ref)
		}
	}
	nkeys := len(refs) - 1
	for _, c := range calls {
		if c.fence == nil || b.fences[c.fence.Doc().Path] != nil {
			continue
		}
		if b.fences == nil {
			b.fences, b.marked = make(map[string]*fenced), make(map[string]bool)
		}
		b.fences[c.fence.Doc().Path] = &fenced{f: c.fence}
		refs = append(refs, c.fence.Doc())
	}
	// The memberships, if this instance knows the entitlement's owner;
	// else they are read after it.
	owner, knownOwner := s.owners.of(entitlementID)
	nfenced := len(refs) - 1 - nkeys
	if knownOwner {
		b.members = members{walletID: owner}
		refs = append(refs, b.members.refs(s, agentsOf(calls)...)...)
	}
	var known []*batchKey // read before they queued, not in refs
	for _, c := range calls {
		if c.pre != nil && b.keys[c.key] == nil {
			k := b.key(c.key)
			k.keyDoc = c.pre.Clone()
			known = append(known, k)
		}
	}
	snaps, err := s.readGuarded(ctx, refs...)
	if err != nil {
		return nil, err
	}
	if err := b.decodeKeys(snaps[1 : 1+nkeys]); err != nil {
		return nil, err
	}
	for _, snap := range snaps[1+nkeys : 1+nkeys+nfenced] {
		b.fences[snap.Ref.Path].snap = snap
	}
	b.writes = 1 // the entitlement
	b.entSnap = snaps[0]
	if b.Found = snaps[0].Exists(); b.Found {
		if b.E, err = entitlementFrom(snaps[0]); err != nil {
			return nil, err
		}
		b.writer, b.writtenAt = writerOf(snaps[0])
	}
	if err := b.confirm(ctx, known); err != nil {
		return nil, err
	}
	if err := b.readMembers(ctx, calls, snaps[1+nkeys+nfenced:], knownOwner && owner == b.E.AgentID); err != nil {
		return nil, err
	}
	if err := b.gatherIfNeeded(ctx, calls); err != nil {
		return nil, err
	}
	b.Now = s.clock() // after the reads: see instantAfterReads
	if !b.Found {
		return b, nil
	}
	expiry := expiries(&b.E)
	ended := b.Start()
	b.expiredByBatch = len(ended)
	for _, id := range ended {
		if k := b.keys[id]; k != nil {
			if !charge.EndExpired(&k.keyDoc, ended, b.Now) {
				return nil, b.corrupt(k, "the entitlement holds it, but its document is no hold")
			}
			b.touch(k)
			continue
		}
		b.ended = append(b.ended, entitlement.OpenHold{ID: id, ExpiresAt: expiry[id]})
		b.writes++
	}
	return b, nil
}

// key returns the batch's record of document id, adding it if new.
func (b *batch) key(id string) *batchKey {
	k := b.keys[id]
	if k == nil {
		k = &batchKey{ref: b.s.col(colConsumptions).Doc(id)}
		b.keys[id] = k
		b.order = append(b.order, k)
	}
	return k
}

// decodeKeys records the key documents read.
func (b *batch) decodeKeys(snaps []*firestore.DocumentSnapshot) error {
	for _, snap := range snaps {
		k := b.keys[snap.Ref.ID]
		k.keyDoc, k.stored, k.snap = keyDoc{}, snap.Exists(), snap
		if !k.stored {
			continue
		}
		var err error
		if k.keyDoc, err = keyFrom(snap); err != nil {
			return err
		}
	}
	return nil
}

// confirm keeps the holds read before their calls queued that the
// entitlement still holds open, and reads the others again.
func (b *batch) confirm(ctx context.Context, known []*batchKey) error {
	var refs []*firestore.DocumentRef
	for _, k := range known {
		if b.Found && slices.ContainsFunc(b.E.Holds, func(o entitlement.OpenHold) bool { return o.ID == k.ref.ID }) {
			k.stored = true
			continue
		}
		refs = append(refs, k.ref)
	}
	if len(refs) == 0 {
		return nil
	}
	snaps, err := b.s.readGuarded(ctx, refs...)
	if err != nil {
		return err
	}
	return b.decodeKeys(snaps)
}

// touch marks k to be written.
func (b *batch) touch(k *batchKey) {
	if !k.written {
		k.written = true
		b.writes++
	}
}

// fence, for call c about to change something, refuses the change if c's
// fence no longer holds (the error is c's outcome) and otherwise writes
// the fence's mark, once per fence in the batch. Nothing without a fence.
func (b *batch) fence(c *call) error {
	if c.fence == nil {
		return nil
	}
	path := c.fence.Doc().Path
	fd := b.fences[path]
	if err := fd.f.Check(fd.snap); err != nil {
		return err
	}
	if b.marked[path] {
		return nil
	}
	b.marked[path] = true
	b.writes++
	return b.tx.Update(fd.f.Doc(), fd.f.Mark(b.Now), firestore.LastUpdateTime(fd.snap.UpdateTime))
}

// apply applies one call with the charge engine, marks its document to
// be written if the call changed it, and writes the events it raised. A
// call's own failure (a hold not found, a conflict) is its outcome's err;
// a returned error (corrupt data) fails the batch.
func (b *batch) apply(c *call) (outcome, error) {
	if c.op == opExpire {
		n := b.expiredByBatch
		b.expiredByBatch = 0
		return outcome{ended: n}, nil
	}
	k := b.keys[c.key]
	before, events := k.keyDoc, len(b.Events)
	var o outcome
	switch c.op {
	case opConsume:
		o.consume = b.Consume(c.consume, &k.keyDoc, k.ref.ID, c.fingerprint)
	case opAuthorize:
		o.hold = b.Authorize(c.hold, &k.keyDoc, k.ref.ID, c.fingerprint)
	case opCapture:
		o.hold, o.err = b.Capture(&k.keyDoc, c.key, c.agentID, c.amount, k.ref.ID)
	case opRelease:
		o.hold, o.err = b.Release(&k.keyDoc, c.key, c.agentID)
	case opRefund:
		o.refund, o.err = b.Refund(&k.keyDoc, c.key, c.amount, func() error { return b.fence(c) })
	}
	if store.CodeOf(o.err) == store.CodeInternal {
		return outcome{}, o.err
	}
	if o.err == nil && (k.Cons != before.Cons || k.Hold != before.Hold || changedHold(o.hold)) {
		b.touch(k)
	}
	b.writes += b.members.touch(b.MembersChanged, c.agent(), chargedBy(&o)) // each membership once
	for _, ev := range b.Events[events:] {
		b.writes++
		if err := b.s.enqueue(b.tx, ev.Type, ev.AgentID, b.Now, ev.Data); err != nil {
			return outcome{}, err
		}
	}
	return o, nil
}

// changedHold reports whether a capture or release answer ended its hold
// (the hold's document changes in place).
func changedHold(r store.HoldResult) bool {
	return r.Outcome == store.Captured || r.Outcome == store.Released
}

// write writes the entitlement and every document the batch changed, each
// once. The entitlement is written whenever anything is, changed or not
// (a subscription's consume changes only its consumption): its guarded
// write is what makes the commit fail if it changed since the batch read
// it.
func (b *batch) write() error {
	if b.Found && (b.Changed || b.writes > 1) {
		if err := putGuarded(b.tx, b.entSnap, b.s.writtenDoc(&b.E, b.Now)); err != nil {
			return err
		}
	}
	if b.took != nil {
		if err := b.tx.Create(b.s.leaseRef(b.E.ID, b.took.ID), leaseDoc(b.took)); err != nil {
			return err
		}
	}
	for i := range b.gathered {
		if err := putGuarded(b.tx, b.gatheredSnaps[i], leaseDoc(&b.gathered[i])); err != nil {
			return err
		}
	}
	for _, o := range b.ended {
		if err := b.s.endHold(b.tx, o.ID, entitlement.HoldExpired, o.ExpiresAt); err != nil {
			return err
		}
	}
	if err := b.members.write(b.tx); err != nil {
		return err
	}
	for _, k := range b.order {
		if !k.written {
			continue
		}
		var err error
		switch {
		case k.stored && k.snap != nil:
			err = putGuarded(b.tx, k.snap, keyDocument(&k.keyDoc))
		case k.stored: // an open hold the registry vouches for (readBatch)
			err = b.tx.Set(k.ref, keyDocument(&k.keyDoc))
		default:
			err = b.tx.Create(k.ref, keyDocument(&k.keyDoc))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// corrupt is the error of a document and its entitlement that disagree.
func (b *batch) corrupt(k *batchKey, what string) error {
	return store.Errorf(store.CodeInternal, "corrupt data: %s: %s", docPath(k.ref), what)
}
