package fsledger_test

import (
	"context"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/internal/emulator"
)

// newLedger returns a ledger on the emulator in a collection of its own.
func newLedger(tb testing.TB, now func() time.Time) *fsledger.Ledger {
	tb.Helper()
	client := emulator.Client(tb)
	collection := idempotency.CollectionName(emulator.Prefix(tb))
	return fsledger.New(client, collection, fsledger.WithClock(now))
}

// newConformanceLedger is newLedger as the conformance suites take it.
func newConformanceLedger(t *testing.T, now func() time.Time) idempotency.Ledger {
	return newLedger(t, now)
}

func TestLedger_Conformance(t *testing.T) {
	emulator.Host(t)
	conformance.RunLedgerTests(t, newConformanceLedger)
}

func TestLedger_Concurrency(t *testing.T) {
	emulator.Host(t)
	conformance.RunLedgerConcurrencyTests(t, newConformanceLedger)
}

func TestLedger_Durable(t *testing.T) {
	if !fsledger.New(nil, "c").Durable() {
		t.Errorf("fsledger.Durable() = false, want true")
	}
}

// TestLedger_ProbeUnreachable checks that Probe fails closed, within its
// bound, when Firestore does not answer.
func TestLedger_ProbeUnreachable(t *testing.T) {
	t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1")
	client, err := firestore.NewClient(context.Background(), emulator.ProjectID)
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	defer client.Close()
	conformance.CheckProbeUnreachable(t, fsledger.New(client, "idem_probe", fsledger.WithProbeTimeout(500*time.Millisecond)), "emulator")
}

// TestLedger_ExpireAtOnlyOnCompletedRows checks the field the TTL policy
// names: absent while in progress (so TTL never deletes an uncertain write),
// a timestamp once completed.
func TestLedger_ExpireAtOnlyOnCompletedRows(t *testing.T) {
	clock := conformance.NewClock()
	l := newLedger(t, clock.Now)
	client := emulator.Client(t)
	ctx := context.Background()
	id := idempotency.HashKey("ns", "route", "k")
	res, err := l.Reserve(ctx, idempotency.Attempt{ID: id, Route: "route", Fingerprint: "f"})
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	doc := client.Collection(l.Collection()).Doc(id)
	snap, err := doc.Get(ctx)
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if _, err := snap.DataAt("expireAt"); err == nil {
		t.Errorf("in-progress row has an expireAt field; want none")
	}
	expire := clock.Now().Add(time.Hour)
	if err := l.Complete(ctx, res.Reservation(), idempotency.Response{Status: 200, Body: []byte("{}")}, expire); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if snap, err = doc.Get(ctx); err != nil {
		t.Fatalf("Get: %v", err)
	}
	got, err := snap.DataAt("expireAt")
	if err != nil {
		t.Fatalf("completed row: DataAt(expireAt): %v", err)
	}
	if ts, ok := got.(time.Time); !ok || !ts.Equal(expire) {
		t.Errorf("expireAt = %v, want the timestamp %v", got, expire)
	}
}
