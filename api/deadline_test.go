package api_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
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
		// Long enough for the calls after the stall on a loaded emulator
		// (seconds each), far below the 20 s retry budget a stalled store
		// took before.
		timeout = 5 * time.Second
		margin  = 2 * time.Second // scheduling and answering
	)
	proxy := emulator.NewProxy(t)
	st := fsstore.New(proxy.Client(t), fsstore.WithCollectionPrefix(emulator.Prefix(t)))
	e := newEnv(t, func(c *api.Config) {
		c.Store, c.Webhooks.Deliveries, c.StoreTimeout = st, st, timeout
	})
	// The setup goes to the store itself, without the requests' deadline:
	// a freshly started emulator may take longer than that to answer its
	// first calls.
	ent, err := st.CreateEntitlement(t.Context(), entitlement.Entitlement{ID: uuid.NewString(), AgentID: agentA, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "search"}, Credits: entitlement.Credits{Balance: money.Money{Cents: 1000, Currency: "USD"}}})
	if err != nil {
		t.Fatal(err)
	}
	created, err := st.CreatePayment(t.Context(), payment.Payment{AgentID: agentB, Amount: money.Money{Cents: 500, Currency: "USD"},
		Provider: payment.ProviderManual, Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey: "stalled-pay", Fingerprint: "fp"})
	if err != nil {
		t.Fatal(err)
	}
	p := created.Payment

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

	// Retries with the same keys, as a client makes them (a 503 again, while
	// the connection recovers, is retried too): each call is made once,
	// whatever the stalled attempts did.
	retry := func(r req) response {
		t.Helper()
		for range 30 {
			if res := e.do(r); res.Status != http.StatusServiceUnavailable {
				return res
			}
		}
		t.Fatalf("%s %s: still 503 after 30 attempts once Firestore answers again", r.Method, r.Path)
		return response{}
	}
	for i := range 9 {
		key := "stalled-" + string(rune('0'+i))
		res := retry(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, key, 10)})
		var out struct{ Result string }
		res.decode(t, &out)
		if res.Status != http.StatusOK || (out.Result != "consumed" && out.Result != "replay") {
			t.Errorf("retry of %s after the stall: status %d body %s, want 200 consumed or replay", key, res.Status, res.Body)
		}
	}
	if got, err := st.GetEntitlement(t.Context(), ent.ID); err != nil || got.Credits.Balance.Cents != 1000-9*10 {
		t.Errorf("balance after the stall and the retries = %d, %v; want %d (nine consumes of 10, each once)", got.Credits.Balance.Cents, err, 1000-9*10)
	}
	if res := retry(req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing}); res.Status != http.StatusOK {
		t.Errorf("retry of the payment's completion after the stall: status %d body %s, want 200", res.Status, res.Body)
	}
}
