package firestore

import (
	"context"
	"maps"
	"slices"
	"testing"

	"cloud.google.com/go/firestore"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
)

// TestPutGuarded checks the optimistic write of guard.go on the emulator:
// it replaces the whole document (fields the new one lacks are gone), a
// snapshot gone stale fails the commit with a stale read and writes
// nothing, and a document read missing is created only if still missing.
func TestPutGuarded(t *testing.T) {
	client := emulator.Client(t)
	s := New(client, WithCollectionPrefix(emulator.Prefix(t)))
	ctx := t.Context()
	ref := s.col("guarded").Doc("d")
	if _, err := ref.Set(ctx, map[string]any{"a": 1, "b": map[string]any{"x": 1}, "c": "gone"}); err != nil {
		t.Fatal(err)
	}
	commit := func(snap *firestore.DocumentSnapshot, doc map[string]any) error {
		return client.RunTransaction(ctx, func(_ context.Context, tx *firestore.Transaction) error {
			return putGuarded(tx, snap, doc)
		}, firestore.MaxAttempts(1))
	}
	read := func(ref *firestore.DocumentRef) *firestore.DocumentSnapshot {
		t.Helper()
		snaps, err := s.readGuarded(ctx, ref)
		if err != nil {
			t.Fatal(err)
		}
		return snaps[0]
	}

	first := read(ref)
	if err := commit(first, map[string]any{"a": 2, "b": map[string]any{"y": 2}, "d": true}); err != nil {
		t.Fatalf("guarded write of a fresh read: %v", err)
	}
	now := read(ref)
	if got, want := slices.Sorted(maps.Keys(now.Data())), []string{"a", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("fields after the replacement %v, want %v", got, want)
	}
	if b := now.Data()["b"].(map[string]any); len(b) != 1 || b["y"] != int64(2) {
		t.Errorf("b = %v, want the new map {y: 2} alone", b)
	}

	// first is stale now: the commit must fail as a stale read, and leave
	// the document as it is.
	err := commit(first, map[string]any{"a": 3})
	if !staleRead(err) {
		t.Fatalf("guarded write of a stale read: %v (code %v), want FailedPrecondition", err, status.Code(err))
	}
	if after := read(ref); after.Data()["a"] != int64(2) || !after.UpdateTime.Equal(now.UpdateTime) {
		t.Errorf("a stale guarded write changed the document: %v", after.Data())
	}

	// A document read missing is created, unless another writer created it
	// first (AlreadyExists, which Store.run retries as a lost race).
	missing := s.col("guarded").Doc("new")
	gone := read(missing)
	if gone.Exists() {
		t.Fatal("the new document exists before the test made it")
	}
	if _, err := missing.Create(ctx, map[string]any{"by": "other"}); err != nil {
		t.Fatal(err)
	}
	if err := commit(gone, map[string]any{"by": "us"}); status.Code(err) != codes.AlreadyExists || !retryable(err) {
		t.Errorf("guarded create of a document created meanwhile: %v, want a retryable AlreadyExists", err)
	}
	if err := commit(read(s.col("guarded").Doc("fresh")), map[string]any{"by": "us"}); err != nil {
		t.Errorf("guarded create of a missing document: %v", err)
	}
}

// TestOutlasted: a transaction whose contention outlasted the retry budget
// is Unavailable and certain, whatever its last attempt failed with: a
// stale guarded read (FailedPrecondition) once answered 500 (issue 29,
// item 8), an abort 503.
func TestOutlasted(t *testing.T) {
	for _, err := range []error{
		status.Error(codes.FailedPrecondition, "the stored document has changed"),
		status.Error(codes.Aborted, "Transaction lock timeout"),
		&tornRead{store.Errorf(store.CodeInternal, "corrupt data: a registered lease is missing")},
	} {
		got := outlasted(err, "batch on entitlement")
		if store.CodeOf(got) != store.CodeUnavailable || store.IsUncertain(got) {
			t.Errorf("outlasted(%v) = %v (code %s, uncertain %v), want Unavailable and certain", err, got, store.CodeOf(got), store.IsUncertain(got))
		}
	}
}
