package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/store"
)

// fencedAttempt is ledgerAttempt on a fenced route.
func fencedAttempt(key, body string) idempotency.Attempt {
	a := ledgerAttempt(key, body)
	a.Fenced = true
	return a
}

// ledgerReclaimTests: Reclaim, the compare-and-set that releases a fenced
// row no change was written for. (Rows a change marked written are in the
// fencing suite, RunFenceTests, which needs a store.)
var ledgerReclaimTests = []ledgerTest{
	{"Reserve/FencedAttemptStored", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := fencedAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		got := ledgerMustGet(t, l, a.ID)
		if !res.Record.Fenced || !got.Fenced || !got.WrittenAt.IsZero() {
			t.Errorf("fenced reservation: Reserve says Fenced %v, Get says Fenced %v, WrittenAt %v; want fenced and not written", res.Record.Fenced, got.Fenced, got.WrittenAt)
		}
		if plain := ledgerMustReserve(t, l, ledgerAttempt("k2", `{}`), idempotency.Reserved); plain.Record.Fenced {
			t.Errorf("unfenced reservation: Fenced true, want false")
		}
	}},
	{"Reclaim/FencedUnwrittenRow", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		ctx := context.Background()
		a := fencedAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Reclaim(ctx, ledgerMustGet(t, l, a.ID)); err != nil {
			t.Fatalf("Reclaim(fenced, unwritten row): %v", err)
		}
		_, err := l.Get(ctx, a.ID)
		wantCode(t, "Get after Reclaim", err, store.CodeNotFound)
		err = l.Complete(ctx, res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour))
		wantCode(t, "Complete by the holder after Reclaim", err, store.CodeConflict)
		wantCode(t, "Release by the holder after Reclaim", l.Release(ctx, res.Reservation()), store.CodeConflict)
		again := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if again.Record.Token == res.Record.Token {
			t.Errorf("a new reservation has the reclaimed one's token %q; want a new token", again.Record.Token)
		}
		wantCode(t, "second Reclaim of the old row", l.Reclaim(ctx, res.Record), store.CodeConflict)
	}},
	{"Reclaim/AbsentRow", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := fencedAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Reclaim(context.Background(), res.Record); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		wantCode(t, "Reclaim of a row already gone", l.Reclaim(context.Background(), res.Record), store.CodeNotFound)
	}},
	{"Reclaim/UnfencedRowRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		wantCode(t, "Reclaim(unfenced row)", l.Reclaim(context.Background(), res.Record), store.CodeConflict)
		ledgerMustReserve(t, l, a, idempotency.InProgress)
	}},
	{"Reclaim/ChangedRowRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		ctx := context.Background()
		a := fencedAttempt("k1", `{}`)
		first := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Release(ctx, first.Reservation()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		second := ledgerMustReserve(t, l, a, idempotency.Reserved)
		// The row as read before it changed: the new reservation is not
		// the one the reclaimer read, so nothing proves anything about it.
		wantCode(t, "Reclaim(the row as it was before)", l.Reclaim(ctx, first.Record), store.CodeConflict)
		if got := ledgerMustGet(t, l, a.ID); got.Token != second.Record.Token {
			t.Errorf("after a stale Reclaim the row's token is %q, want the new reservation's %q", got.Token, second.Record.Token)
		}
	}},
	{"Reclaim/CompletedRowRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		ctx := context.Background()
		a := fencedAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Complete(ctx, res.Reservation(), ledgerResponse(`{"n":1}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		wantCode(t, "Reclaim(completed row)", l.Reclaim(ctx, ledgerMustGet(t, l, a.ID)), store.CodeConflict)
		ledgerMustReserve(t, l, a, idempotency.Replay)
	}},
}
