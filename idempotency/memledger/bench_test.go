package memledger_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
)

// BenchmarkReserveComplete measures the memory ledger's Reserve + Complete.
//
//	go test -run '^$' -bench . ./idempotency/memledger/
func BenchmarkReserveComplete(b *testing.B) {
	l := memledger.New("bench")
	ctx := context.Background()
	resp := idempotency.Response{Status: 201, Body: []byte(`{"id":"x"}`)}
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = idempotency.HashKey("bench", "r", strconv.Itoa(i))
	}
	b.ResetTimer()
	for i := range b.N {
		res, err := l.Reserve(ctx, idempotency.Attempt{ID: ids[i], Fingerprint: "f"})
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Complete(ctx, res.Reservation(), resp, time.Now().Add(time.Hour)); err != nil {
			b.Fatal(err)
		}
	}
}
