package firestore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// TestStore_StalledBatchKeepsDeadlines: a lane's batch whose transaction
// stalls (a proxy in front of the emulator stops forwarding) keeps its
// callers' deadlines. The batch's callers leave at their deadline with an
// uncertain unavailable (their call may yet commit); the calls queued
// behind the batch leave at theirs with a definite one (no batch took them
// on); a caller still waiting keeps the batch going, and once Firestore
// answers again gets its answer, so its commit is never cancelled under it.
func TestStore_StalledBatchKeepsDeadlines(t *testing.T) {
	const (
		short  = time.Second
		margin = time.Second // scheduling; without the deadlines the batch would hold them for the 20 s retry budget
	)
	proxy := emulator.NewProxy(t)
	s := fsstore.New(proxy.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithMaxBatch(2))
	e := entitlement.Entitlement{ID: "e-stalled", AgentID: "agent-stall", Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "search"}, Credits: entitlement.Credits{Balance: money.Money{Cents: 1000, Currency: "USD"}}}
	if _, err := s.CreateEntitlement(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	consume := func(ctx context.Context, key string) (store.ConsumeResult, error) {
		return s.CheckAndConsume(ctx, entitlement.ConsumeRequest{AgentID: e.AgentID, Service: "search", Tool: "web",
			IdempotencyKey: key, EntitlementID: e.ID, Cost: &money.Money{Cents: 10, Currency: "USD"}})
	}

	// The batch takes the first two calls: "patient" (which waits as long
	// as it takes) and "in-batch"; "queued-N" wait behind it.
	waitQueued, resume := fsstore.PauseLane(s, e.ID)
	type answer struct {
		key  string
		took time.Duration
		err  error
	}
	answers := make(chan answer, 8)
	patient := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Go(func() { _, err := consume(t.Context(), "patient"); patient <- err })
	waitQueued(1)
	for i, key := range []string{"in-batch", "queued-1", "queued-2", "queued-3"} {
		wg.Go(func() {
			start := time.Now()
			ctx, cancel := context.WithTimeout(t.Context(), short)
			defer cancel()
			_, err := consume(ctx, key)
			answers <- answer{key, time.Since(start), err}
		})
		waitQueued(i + 2)
	}
	proxy.Stall()
	resume()
	for range 4 {
		a := <-answers
		if store.CodeOf(a.err) != store.CodeUnavailable || a.took > short+margin {
			t.Errorf("consume %s while its batch stalls: %v after %v; want unavailable within %v plus %v", a.key, a.err, a.took.Round(time.Millisecond), short, margin)
		}
		if wantUncertain := a.key == "in-batch"; store.IsUncertain(a.err) != wantUncertain {
			t.Errorf("consume %s while its batch stalls: uncertain %v, want %v (%v)", a.key, store.IsUncertain(a.err), wantUncertain, a.err)
		}
	}
	proxy.Resume()
	if err := <-patient; err != nil {
		t.Fatalf("consume patient, which waited out the stall: %v; want its batch's answer", err)
	}
	wg.Wait()

	// The batch committed both of its calls; the queued ones were never
	// applied, and their retries apply them now.
	for key, want := range map[string]store.Outcome{"in-batch": store.Replay, "queued-1": store.Consumed, "queued-2": store.Consumed, "queued-3": store.Consumed} {
		res, err := consume(t.Context(), key)
		if err != nil || res.Outcome != want {
			t.Errorf("retry of consume %s after the stall = %v, %v; want %s", key, res.Outcome, err, want)
		}
	}
	got, err := s.GetEntitlement(t.Context(), e.ID)
	if err != nil || got.Credits.Balance.Cents != 1000-5*10 {
		t.Errorf("balance after the stall = %d, %v; want %d (five calls of 10, each once)", got.Credits.Balance.Cents, err, 1000-5*10)
	}
}
