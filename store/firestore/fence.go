package firestore

import (
	"context"
	"strings"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/store"
)

// txFence is what the store needs of a fence (see store.Fence):
// idempotency/fsledger's fences have it. The ledger's row lives in the
// store's database, so the change's own transaction reads it and writes
// its mark, and Firestore orders the transaction against the ledger's
// conditional writes.
type txFence interface {
	store.Fence
	// Doc is the reservation's document.
	Doc() *firestore.DocumentRef
	// Check says whether Doc as the transaction read it still is the
	// reservation: nil, or an error wrapping store.ErrFenced.
	Check(snap *firestore.DocumentSnapshot) error
	// Mark is the update that marks the row written at now.
	Mark(now time.Time) []firestore.Update
}

// fenceOf returns the fence ctx carries, nil without one. A fence the
// store cannot check (of another backend, or on another database) is an
// Internal error: the change must not be made unfenced.
func (s *Store) fenceOf(ctx context.Context) (txFence, error) {
	f := store.FenceOf(ctx)
	if f == nil {
		return nil, nil
	}
	tf, ok := f.(txFence)
	if !ok {
		return nil, store.Errorf(store.CodeInternal, "%s: the Firestore store cannot check this fence (a ledger of another backend)", f.Claim())
	}
	if !strings.HasPrefix(tf.Doc().Path, s.database()) {
		return nil, store.Errorf(store.CodeInternal, "%s: the ledger is on another database than the store", f.Claim())
	}
	return tf, nil
}

// database returns the path prefix of the store's documents,
// "projects/P/databases/D/documents/".
func (s *Store) database() string {
	return strings.TrimSuffix(s.client.Collection("x").Path, "x")
}

// fenced is a change's fence as its transaction read it; nil for a change
// without one.
type fenced struct {
	f    txFence
	snap *firestore.DocumentSnapshot
}

// readFence reads, in tx, the fence ctx carries: call it with the
// transaction's reads. Nil (and no read) without a fence.
func (s *Store) readFence(ctx context.Context, tx *firestore.Transaction) (*fenced, error) {
	f, err := s.fenceOf(ctx)
	if f == nil || err != nil {
		return nil, err
	}
	snaps, err := tx.GetAll([]*firestore.DocumentRef{f.Doc()})
	if err != nil {
		return nil, err
	}
	return &fenced{f: f, snap: snaps[0]}, nil
}

// mark, for a change about to be written, refuses it if the fence no
// longer holds (the transaction then fails and writes nothing), and
// otherwise writes the fence's mark with the change. Nothing for nil.
func (fd *fenced) mark(tx *firestore.Transaction, now time.Time) error {
	if fd == nil {
		return nil
	}
	if err := fd.f.Check(fd.snap); err != nil {
		return err
	}
	return tx.Update(fd.f.Doc(), fd.f.Mark(now), firestore.LastUpdateTime(fd.snap.UpdateTime))
}
