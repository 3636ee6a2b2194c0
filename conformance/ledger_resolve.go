package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/store"
)

var ledgerResolveTests = []ledgerTest{
	{"Reference/SanitizedAndInspectable", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("my-secret-key", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		ref := l.Reference(a.ID)
		if strings.Contains(ref, "my-secret-key") || strings.Contains(ref, "principal-1") {
			t.Errorf("Reference = %q: contains the raw key or principal", ref)
		}
		_, _, id, err := idempotency.ParseReference(ref)
		if err != nil || id != a.ID {
			t.Fatalf("ParseReference(%q) = id %q, %v; want %q", ref, id, err, a.ID)
		}
		got, err := l.Inspect(context.Background(), ref)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", ref, err)
		}
		if diff := cmp.Diff(res.Record, got); diff != "" {
			t.Errorf("Inspect (-reserved +inspected):\n%s", diff)
		}
	}},
	{"Inspect/ForeignReferenceRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		ledgerMustReserve(t, l, a, idempotency.Reserved)
		for _, ref := range []string{"elsewhere/idem_0/" + a.ID, "firestore/idem_other/" + a.ID, "k1", l.Reference("k1")} {
			_, err := l.Inspect(context.Background(), ref)
			wantCode(t, "Inspect("+ref+")", err, store.CodeInvalid)
		}
	}},
	{"ResolveDelete/CompareAndSet", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		ref := l.Reference(a.ID)
		stale := res.Record.UpdateTime.Add(-time.Millisecond)
		wantCode(t, "ResolveDelete(stale update time)", l.ResolveDelete(context.Background(), ref, stale), store.CodeConflict)
		ledgerMustGet(t, l, a.ID)
		if err := l.ResolveDelete(context.Background(), ref, res.Record.UpdateTime); err != nil {
			t.Fatalf("ResolveDelete(current update time): %v", err)
		}
		// The original holder's reservation is gone with the row.
		err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour))
		wantCode(t, "Complete after ResolveDelete", err, store.CodeConflict)
		ledgerMustReserve(t, l, a, idempotency.Reserved)
	}},
	{"ResolveDelete/RefusedWhenRowChangedUnderneath", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		inspected, err := l.Inspect(context.Background(), l.Reference(a.ID))
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		// The holder completes between the operator's inspect and resolve.
		if err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		err = l.ResolveDelete(context.Background(), l.Reference(a.ID), inspected.UpdateTime)
		wantCode(t, "ResolveDelete after the row changed", err, store.CodeConflict)
		ledgerMustReserve(t, l, a, idempotency.Replay)
	}},
	{"ResolveDelete/Absent", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		id := ledgerAttempt("none", `{}`).ID
		err := l.ResolveDelete(context.Background(), l.Reference(id), clock.Now())
		wantCode(t, "ResolveDelete(absent row)", err, store.CodeNotFound)
	}},
	{"ResolveComplete/CompareAndSetThenReplay", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		ref := l.Reference(a.ID)
		resp := ledgerResponse(`{"proved":true}`)
		expire := clock.Now().Add(time.Hour)
		stale := res.Record.UpdateTime.Add(-time.Millisecond)
		wantCode(t, "ResolveComplete(stale update time)", l.ResolveComplete(context.Background(), ref, stale, resp, expire), store.CodeConflict)
		if err := l.ResolveComplete(context.Background(), ref, res.Record.UpdateTime, resp, expire); err != nil {
			t.Fatalf("ResolveComplete(current update time): %v", err)
		}
		got := ledgerMustReserve(t, l, a, idempotency.Replay)
		if diff := cmp.Diff(resp, *got.Record.Response); diff != "" {
			t.Errorf("replay after ResolveComplete (-want +got):\n%s", diff)
		}
		err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), expire)
		wantCode(t, "the original holder's Complete after ResolveComplete", err, store.CodeConflict)
	}},
	{"ResolveComplete/RefusedWhenRowChangedUnderneath", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		inspected := ledgerMustGet(t, l, a.ID)
		if err := l.Release(context.Background(), res.Reservation()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		ledgerMustReserve(t, l, a, idempotency.Reserved)
		err := l.ResolveComplete(context.Background(), l.Reference(a.ID), inspected.UpdateTime, ledgerResponse(`{}`), clock.Now().Add(time.Hour))
		wantCode(t, "ResolveComplete after the row was replaced", err, store.CodeConflict)
		ledgerMustReserve(t, l, a, idempotency.InProgress)
	}},
	{"ResolveComplete/CompletedRowRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{"n":1}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		current := ledgerMustGet(t, l, a.ID)
		err := l.ResolveComplete(context.Background(), l.Reference(a.ID), current.UpdateTime, ledgerResponse(`{"n":2}`), clock.Now().Add(time.Hour))
		wantCode(t, "ResolveComplete(completed row)", err, store.CodeConflict)
	}},
	{"ResolveComplete/OversizeRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		big := ledgerResponse(strings.Repeat("x", idempotency.MaxResponseBytes))
		err := l.ResolveComplete(context.Background(), l.Reference(a.ID), res.Record.UpdateTime, big, clock.Now().Add(time.Hour))
		wantCode(t, "ResolveComplete(oversize)", err, store.CodeInvalid)
		ledgerMustReserve(t, l, a, idempotency.InProgress)
	}},
}
