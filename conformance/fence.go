package conformance

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// Fenced is a store and an idempotency ledger that live in one database,
// so the store checks the ledger's fences (see store.Fence). Store is the
// one store, as both its entitlement and its delivery contract.
type Fenced struct {
	Store interface {
		store.EntitlementStore
		store.DeliveryStore
	}
	Ledger idempotency.Ledger
}

// NewFenced returns a fresh, empty store and ledger on one database that
// read time from now.
type NewFenced func(t *testing.T, now func() time.Time) Fenced

// fencedChange is one of the store methods that honour a fence, made
// ready to run: do makes the change with ctx, changed reports whether it
// is made (in the store, as a reader sees it).
type fencedChange struct {
	name string
	// prepare sets up what the change needs and returns it.
	prepare func(t *testing.T, f Fenced, clock *Clock) (do func(ctx context.Context) error, changed func(t *testing.T) bool)
}

// fencedChanges: every store method a ledger route calls.
var fencedChanges = []fencedChange{
	portalSessionFence, // portal.go
	{"CreateEntitlement", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
		e := credits(newAgent(), 500, clock.Now())
		return func(ctx context.Context) error { return errOf(f.Store.CreateEntitlement(ctx, e)) },
			func(t *testing.T) bool { return errOf(f.Store.GetEntitlement(context.Background(), e.ID)) == nil }
	}},
	{"RefundConsumption", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
		agent := newAgent()
		createEntitlement(t, f.Store, credits(agent, 500, clock.Now()))
		c := mustConsume(t, f.Store, request(agent, "k-"+uuid.NewString(), 70)).Consumption
		return func(ctx context.Context) error {
				return errOf(f.Store.RefundConsumption(ctx, c.ID, entitlement.Amount{}))
			},
			func(t *testing.T) bool {
				return must(f.Store.GetConsumption(context.Background(), c.ID))(t, "GetConsumption").Refund != nil
			}
	}},
	{"RefundPayment", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
		p := createPayment(t, f.Store, newPayment(newAgent(), "pay-"+uuid.NewString(), 700))
		completePayment(t, f.Store, p.ID)
		return func(ctx context.Context) error { return errOf(f.Store.RefundPayment(ctx, p.ID, signing)) },
			func(t *testing.T) bool {
				return must(f.Store.GetPayment(context.Background(), p.ID))(t, "GetPayment").Status == payment.StatusRefunded
			}
	}},
	{"CreateEndpoint", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
		e := store.Endpoint{ID: uuid.NewString(), URL: "https://example.com/hooks", Secret: TestSecret}
		return func(ctx context.Context) error { return errOf(f.Store.CreateEndpoint(ctx, e)) },
			func(t *testing.T) bool { return errOf(f.Store.GetEndpoint(context.Background(), e.ID)) == nil }
	}},
	{"RotateEndpointSecret", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
		e := newEndpoint(t, f.Store)
		const next = "whsec_Nf0Q9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		return func(ctx context.Context) error {
				return errOf(f.Store.RotateEndpointSecret(ctx, e.ID, next, time.Time{}))
			},
			func(t *testing.T) bool {
				return must(f.Store.GetEndpoint(context.Background(), e.ID))(t, "GetEndpoint").Secret == next
			}
	}},
	{"RetryDelivery", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
		e := newEndpoint(t, f.Store)
		d := enqueue(t, f.Store, newDelivery(e.ID, event.PaymentSucceeded))
		token := ""
		for _, c := range claim(t, f.Store, clock.Now(), store.MaxPageSize, time.Minute, "w") {
			if c.ID == d.ID {
				token = c.ClaimToken
			}
		}
		if token == "" {
			t.Fatalf("claim: delivery %s not claimed", d.ID)
		}
		if _, err := f.Store.FinishDelivery(context.Background(), d.ID, token, store.AttemptResult{Status: store.DeliveryDead, Error: "gone"}); err != nil {
			t.Fatalf("FinishDelivery(dead): %v", err)
		}
		return func(ctx context.Context) error { return errOf(f.Store.RetryDelivery(ctx, d.ID)) },
			func(t *testing.T) bool {
				return must(f.Store.GetDelivery(context.Background(), d.ID))(t, "GetDelivery").Status == store.DeliveryPending
			}
	}},
}

// reserveFenced reserves a new key on a fenced route and returns the
// reservation as Reserve answered it.
func reserveFenced(t *testing.T, l idempotency.Ledger) idempotency.Result {
	t.Helper()
	return ledgerMustReserve(t, l, fencedAttempt("k-"+uuid.NewString(), `{}`), idempotency.Reserved)
}

// fenceOf returns the context of a handler holding res.
func fenceOf(l idempotency.Ledger, res idempotency.Result) context.Context {
	return store.WithFence(context.Background(), l.Fence(res.Reservation()))
}

// wantFenced fails unless err is a fenced refusal: Unavailable wrapping
// store.ErrFenced, not Uncertain.
func wantFenced(t *testing.T, call string, err error) {
	t.Helper()
	if !errors.Is(err, store.ErrFenced) || store.CodeOf(err) != store.CodeUnavailable || store.IsUncertain(err) {
		t.Errorf("%s: got %v (code %q, uncertain %v), want an Unavailable error wrapping store.ErrFenced, not Uncertain",
			call, err, store.CodeOf(err), store.IsUncertain(err))
	}
}

// fenceCases are the cases run for each fenced change.
var fenceCases = []struct {
	name string
	run  func(t *testing.T, f Fenced, clock *Clock, ch fencedChange)
}{
	{"HeldMarksWritten", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		ctx := context.Background()
		do, changed := ch.prepare(t, f, clock)
		res := reserveFenced(t, f.Ledger)
		if err := do(fenceOf(f.Ledger, res)); err != nil {
			t.Fatalf("%s with a fence that holds: %v", ch.name, err)
		}
		if !changed(t) {
			t.Fatalf("%s with a fence that holds: nothing changed", ch.name)
		}
		row := ledgerMustGet(t, f.Ledger, res.Record.ID)
		if row.WrittenAt.IsZero() || row.State != idempotency.StateInProgress {
			t.Errorf("row after the change: state %s, WrittenAt %v; want in progress and marked written", row.State, row.WrittenAt)
		}
		wantCode(t, "Reclaim(a row its change marked written)", f.Ledger.Reclaim(ctx, row), store.CodeConflict)
		wantCode(t, "Release(a row its change marked written)", f.Ledger.Release(ctx, res.Reservation()), store.CodeConflict)
		if err := f.Ledger.Complete(ctx, res.Reservation(), ledgerResponse(`{"ok":true}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete by the holder after its change: %v", err)
		}
		again := fencedAttempt("", `{}`)
		again.ID = res.Record.ID
		ledgerMustReserve(t, f.Ledger, again, idempotency.Replay)
	}},
	{"ReclaimedFirstRefuses", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		do, changed := ch.prepare(t, f, clock)
		res := reserveFenced(t, f.Ledger)
		if err := f.Ledger.Reclaim(context.Background(), res.Record); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		wantFenced(t, ch.name+" after its reservation was reclaimed", do(fenceOf(f.Ledger, res)))
		if changed(t) {
			t.Errorf("%s after its reservation was reclaimed: the change was made", ch.name)
		}
	}},
	{"ReservedAgainRefuses", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		do, changed := ch.prepare(t, f, clock)
		res := reserveFenced(t, f.Ledger)
		if err := f.Ledger.Reclaim(context.Background(), res.Record); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		again := fencedAttempt("", `{}`)
		again.ID = res.Record.ID
		next := ledgerMustReserve(t, f.Ledger, again, idempotency.Reserved)
		wantFenced(t, ch.name+" with the fence of a reservation the key no longer has", do(fenceOf(f.Ledger, res)))
		if changed(t) {
			t.Errorf("%s with an old reservation's fence: the change was made", ch.name)
		}
		if row := ledgerMustGet(t, f.Ledger, next.Record.ID); !row.WrittenAt.IsZero() {
			t.Errorf("the new reservation's row is marked written by the old one's change")
		}
	}},
	{"CompletedRefuses", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		do, changed := ch.prepare(t, f, clock)
		res := reserveFenced(t, f.Ledger)
		err := f.Ledger.ResolveComplete(context.Background(), f.Ledger.Reference(res.Record.ID), res.Record.UpdateTime,
			ledgerResponse(`{}`), clock.Now().Add(time.Hour))
		if err != nil {
			t.Fatalf("ResolveComplete: %v", err)
		}
		wantFenced(t, ch.name+" after an operator completed the row", do(fenceOf(f.Ledger, res)))
		if changed(t) {
			t.Errorf("%s after an operator completed the row: the change was made", ch.name)
		}
	}},
	{"WrittenFirstReclaimRefuses", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		// A reclaimer read the row, then the change committed: the
		// reclaim must refuse, and the key completes and replays.
		ctx := context.Background()
		do, _ := ch.prepare(t, f, clock)
		res := reserveFenced(t, f.Ledger)
		read := ledgerMustGet(t, f.Ledger, res.Record.ID)
		if err := do(fenceOf(f.Ledger, res)); err != nil {
			t.Fatalf("%s: %v", ch.name, err)
		}
		wantCode(t, "Reclaim(the row as read before the change)", f.Ledger.Reclaim(ctx, read), store.CodeConflict)
		if err := f.Ledger.Complete(ctx, res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete after the refused reclaim: %v", err)
		}
	}},
	{"ForeignFenceRefused", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		do, changed := ch.prepare(t, f, clock)
		err := do(store.WithFence(context.Background(), foreignFence{}))
		wantCode(t, ch.name+" with a fence the store cannot check", err, store.CodeInternal)
		if changed(t) {
			t.Errorf("%s with a fence the store cannot check: the change was made", ch.name)
		}
	}},
	{"RacesReclaim", func(t *testing.T, f Fenced, clock *Clock, ch fencedChange) {
		// The change and a reclaim of the row as read before it, at once:
		// exactly one wins. Either the change is made, the reclaim
		// refused and the key completes, or the reclaim releases the key
		// and the change is refused and made nowhere. The reclaim starts
		// a little later in each round (from together with the change to
		// most of the time one change takes), so that rounds meet the
		// change at different points of its transaction. The delays only
		// vary the interleaving; no outcome depends on them.
		const rounds = 6
		do, _ := ch.prepare(t, f, clock)
		began := time.Now()
		if err := do(fenceOf(f.Ledger, reserveFenced(t, f.Ledger))); err != nil {
			t.Fatalf("%s: %v", ch.name, err)
		}
		took := time.Since(began)
		changes := 0
		defer func() { t.Logf("%s racing Reclaim: the change won %d of %d rounds", ch.name, changes, rounds) }()
		for round := range rounds {
			do, changed := ch.prepare(t, f, clock)
			res := reserveFenced(t, f.Ledger)
			var doErr, reclaimErr error
			var wg sync.WaitGroup
			start := make(chan struct{})
			delay := took * time.Duration(round) / rounds
			wg.Go(func() { <-start; doErr = do(fenceOf(f.Ledger, res)) })
			wg.Go(func() {
				<-start
				time.Sleep(delay)
				reclaimErr = f.Ledger.Reclaim(context.Background(), res.Record)
			})
			close(start)
			wg.Wait()
			name := fmt.Sprintf("round %d: %s racing Reclaim", round, ch.name)
			switch {
			case doErr == nil && reclaimErr == nil:
				t.Fatalf("%s: both succeeded; want exactly one", name)
			case doErr == nil:
				changes++
				wantCode(t, name+": Reclaim", reclaimErr, store.CodeConflict)
				if !changed(t) {
					t.Errorf("%s: the change succeeded but is not there", name)
				}
				if err := f.Ledger.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour)); err != nil {
					t.Errorf("%s: Complete after the change won: %v", name, err)
				}
			default:
				wantFenced(t, name+": the change", doErr)
				if reclaimErr != nil {
					t.Errorf("%s: the change was refused and Reclaim failed too (%v); want one of them to win", name, reclaimErr)
				}
				if changed(t) {
					t.Errorf("%s: the change was refused but is there", name)
				}
			}
		}
	}},
}

// foreignFence is a fence of no ledger a store knows.
type foreignFence struct{}

func (foreignFence) Claim() string { return "elsewhere/idem_0/0#0" }
