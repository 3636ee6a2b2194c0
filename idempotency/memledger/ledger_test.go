package memledger_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
)

// newLedger returns a new, empty memory ledger.
func newLedger(_ *testing.T, now func() time.Time) idempotency.Ledger {
	return memledger.New(idempotency.CollectionName("test"), memledger.WithClock(now))
}

func TestLedger_Conformance(t *testing.T) {
	conformance.RunLedgerTests(t, newLedger)
}

func TestLedger_Concurrency(t *testing.T) {
	conformance.RunLedgerConcurrencyTests(t, newLedger)
}

func TestLedger_NotDurable(t *testing.T) {
	if memledger.New("c").Durable() {
		t.Errorf("memledger.Durable() = true, want false: the memory ledger is never horizontally safe")
	}
}
