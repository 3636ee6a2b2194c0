package firestore

import (
	"context"
	"slices"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/store"
)

// The entitlement's document is the one every instance's batches and
// refills write, and a lease's the one its lane's batches and other
// instances' gathers write. So the hot-path transactions (batches on
// entitlements and on leases, refills, releases) read optimistically: every
// document in one GetAll beside the transaction, and each one they write
// back only if it is still as read (its update time, putGuarded); new
// documents are Creates. A commit that finds one changed fails with
// FailedPrecondition before writing anything, and Store.run retries it like
// an abort, reading again.
//
// Read inside the transaction, the entitlement was read-locked until the
// commit. Two instances whose batches both read it and then wrote it each
// waited for the other's read lock to go: the emulator breaks that deadlock
// only after about 2 s ("Transaction lock timeout"), and in production
// every other writer waits out the holder's round trips. So the first
// contact of several instances with one entitlement cost each of them 2 s,
// twice (docs/bench/firestore.md), before their leases took over.
//
// At the commit every document the transaction read and relies on is as it
// read it (written back guarded, or created), so the transaction is as
// serializable as with read locks. A document read but not written (a
// replayed consumption) only answers its call, as any read does: right at
// the instant of the read.

// Documents read together beside a transaction may not agree: the
// emulator's GetAll is not atomic against a concurrent commit (it can
// return one commit's entitlement with the registry of a new lease and
// without the lease document the same commit created; measured). Such a
// read never commits, since a document it read stale fails its guard; but
// the checks that find data corrupt (a registered lease that is missing, a
// registered hold that is no hold) would report it as corruption. So the
// bodies of guarded transactions (runGuarded) mark what those checks find,
// and Store.run retries it up to maxTorn times before it reports the
// corruption.

// maxTorn is how many attempts Store.run retries for a torn read.
const maxTorn = 3

// tornRead is corrupt data found on a guarded read: it may be a torn read.
type tornRead struct{ err error }

func (t *tornRead) Error() string { return t.err.Error() }
func (t *tornRead) Unwrap() error { return t.err }

// runGuarded is Store.run for a transaction that reads guarded: what its
// body finds corrupt is retried as a possible torn read.
func (s *Store) runGuarded(ctx context.Context, what string, fn func(context.Context, *firestore.Transaction) error) error {
	return s.run(ctx, what, func(ctx context.Context, tx *firestore.Transaction) error {
		return tornIfCorrupt(fn(ctx, tx))
	})
}

// tornIfCorrupt marks err as a possible torn read if it reports corrupt
// data (store.CodeInternal); other errors pass as they are.
func tornIfCorrupt(err error) error {
	if err != nil && store.CodeOf(err) == store.CodeInternal {
		return &tornRead{err}
	}
	return err
}

// readGuarded reads refs outside any transaction (strongly consistent),
// in one call; the snapshot of a missing document has Exists false.
func (s *Store) readGuarded(ctx context.Context, refs ...*firestore.DocumentRef) ([]*firestore.DocumentSnapshot, error) {
	return s.client.GetAll(ctx, refs)
}

// putGuarded writes doc in tx as the whole document snap read, on the
// condition that it has not changed since (or, read missing, still does
// not exist).
func putGuarded(tx *firestore.Transaction, snap *firestore.DocumentSnapshot, doc map[string]any) error {
	if !snap.Exists() {
		return tx.Create(snap.Ref, doc)
	}
	// Update, unlike Set, takes the precondition; naming every field of
	// the old and the new document makes it a replacement.
	names := make([]string, 0, len(doc))
	for k := range doc {
		names = append(names, k)
	}
	for k := range snap.Data() {
		if _, ok := doc[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	ups := make([]firestore.Update, len(names))
	for i, k := range names {
		v, ok := doc[k]
		if !ok {
			v = firestore.Delete
		}
		ups[i] = firestore.Update{FieldPath: firestore.FieldPath{k}, Value: v}
	}
	return tx.Update(snap.Ref, ups, firestore.LastUpdateTime(snap.UpdateTime))
}

// staleRead reports whether a commit failed because a document it was
// guarded on (putGuarded) changed since it was read.
func staleRead(err error) bool { return status.Code(err) == codes.FailedPrecondition }
