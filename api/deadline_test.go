package api_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// TestStoreDeadline_FirestoreStall: with Firestore not answering (a proxy
// in front of the emulator stops forwarding, as a paused emulator would),
// every kind of request answers 503 within the store timeout plus a small
// margin — a consume, consumes queued behind a stalled batch, a payment's
// completion, a route behind the idempotency ledger — instead of after the
// store's own retry budget. Once Firestore answers again, a retry with the
// same key finds out what happened, and nothing was charged twice.
func TestStoreDeadline_FirestoreStall(t *testing.T) {
	const (
		// Long enough for the set-up calls on a loaded emulator, far below
		// the 20 s retry budget a stalled store took before.
		timeout = 5 * time.Second
		margin  = 2 * time.Second // scheduling and answering
	)
	proxy := emulator.NewProxy(t)
	e := newEnv(t, func(c *api.Config) {
		st := fsstore.New(proxy.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)), fsstore.WithClock(c.Now))
		c.Store, c.Webhooks.Deliveries, c.StoreTimeout = st, st, timeout
	})
	id := e.grantCredits(agentA, 1000)
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "before", 10)})
	var p payment.Payment
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: paymentBody(agentB, 500),
		Header: map[string]string{"Idempotency-Key": "stalled-pay"}}).decode(t, &p)

	// within sends r and wants a 503 unavailable within the timeout and margin.
	within := func(t *testing.T, what string, r req) {
		t.Helper()
		start := time.Now()
		res := e.with(t).do(r)
		took := time.Since(start)
		t.Logf("%s while Firestore stalls: %d after %v", what, res.Status, took.Round(time.Millisecond))
		if res.Status != http.StatusServiceUnavailable || res.problem(t).Type != problem.Unavailable.URI() {
			t.Errorf("%s while Firestore stalls: status %d body %s, want 503 unavailable", what, res.Status, res.Body)
		}
		if took > timeout+margin {
			t.Errorf("%s while Firestore stalls: answered after %v, want within the store timeout %v plus %v", what, took.Round(time.Millisecond), timeout, margin)
		}
	}
	proxy.Stall()
	t.Run("Consume", func(t *testing.T) {
		within(t, "POST /v1/consume", req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "stalled-0", 10)})
	})
	t.Run("QueuedConsumes", func(t *testing.T) {
		// One batch takes the first on; the others queue behind it.
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				within(t, "a queued POST /v1/consume", req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host,
					Body: consumeBody(agentA, "stalled-"+string(rune('1'+i)), 10)})
			})
		}
		wg.Wait()
	})
	t.Run("PaymentSucceed", func(t *testing.T) {
		within(t, "POST /v1/payments/{id}/succeed", req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing})
	})
	t.Run("LedgerRoute", func(t *testing.T) {
		within(t, "POST /v1/accounts/{agentId}/entitlements", req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
			Body: map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}, "balance": map[string]any{"cents": 5, "currency": "USD"}}})
	})
	proxy.Resume()

	// Retries with the same keys: each call is made once, whatever the
	// stalled attempts did.
	for i := range 9 {
		key := "stalled-" + string(rune('0'+i))
		var out struct{ Result string }
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, key, 10)}).decode(t, &out)
		if out.Result != "consumed" && out.Result != "replay" {
			t.Errorf("retry of %s after the stall: result %q, want consumed or replay", key, out.Result)
		}
	}
	if got := e.balance(id); got != 1000-10*10 {
		t.Errorf("balance after the stall and the retries = %d, want %d (ten consumes of 10, each once)", got, 1000-10*10)
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing})
}
