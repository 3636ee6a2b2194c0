package fsledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
)

// BenchmarkReserveComplete measures one key's ledger round trips on the
// emulator: Create, then Get and an Update with the read's LastUpdateTime
// precondition.
//
//	scripts/test -run '^$' -bench . -benchtime 200x ./idempotency/...
func BenchmarkReserveComplete(b *testing.B) {
	l := newLedger(b, time.Now)
	ctx := context.Background()
	resp := idempotency.Response{Status: 201, Body: []byte(`{"id":"x"}`)}
	b.ResetTimer()
	for i := range b.N {
		a := idempotency.Attempt{ID: idempotency.HashKey("bench", "r", fmt.Sprint(i)), Fingerprint: "f"}
		res, err := l.Reserve(ctx, a)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Complete(ctx, res.Reservation(), resp, time.Now().Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
}
