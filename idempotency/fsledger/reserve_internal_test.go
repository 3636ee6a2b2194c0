package fsledger

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/emulator"
)

// TestReserve_OwnCommittedCreateIsOurs covers a Create that committed but
// whose answer was lost and retried: the row already carries this call's
// nonce, so Reserve must return Reserved (with the row's update time), not
// InProgress, or the key would be stranded until an operator cleared it.
// It is an internal test because only the package knows the nonce.
func TestReserve_OwnCommittedCreateIsOurs(t *testing.T) {
	ctx := context.Background()
	l := New(emulator.Client(t), idempotency.CollectionName(emulator.Prefix(t)))
	a := idempotency.Attempt{ID: idempotency.HashKey("ns", "r", "k"), Fingerprint: "f", OperationID: "op"}
	const nonce = "0123456789abcdef0123456789abcdef"
	wr, err := l.doc(a.ID).Create(ctx, newRow(a, time.Now().UTC().Truncate(time.Microsecond), nonce))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	got, err := l.reserve(ctx, a, nonce)
	if err != nil {
		t.Fatalf("reserve with the row's own nonce: %v", err)
	}
	if got.Outcome != idempotency.Reserved || !got.Record.UpdateTime.Equal(wr.UpdateTime) {
		t.Fatalf("reserve = %s at %v, want reserved at %v", got.Outcome, got.Record.UpdateTime, wr.UpdateTime)
	}
	if err := l.Complete(ctx, got.Reservation(), idempotency.Response{Status: 200}, time.Now().Add(time.Hour)); err != nil {
		t.Errorf("Complete with the recovered reservation: %v", err)
	}
	other, err := l.reserve(ctx, a, "another-call")
	if err != nil || other.Outcome != idempotency.Replay {
		t.Errorf("reserve by another call = %s, %v; want replay", other.Outcome, err)
	}
}
