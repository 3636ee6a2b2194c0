package api_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/internal/emulator"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// newFirestoreEnv is newEnv on the Firestore store (emulator), with a
// collection prefix of its own, and the Firestore ledger beside it on the
// same client, whose fences the store checks, as `stipend serve` wires them.
func newFirestoreEnv(t *testing.T) *env {
	t.Helper()
	client, prefix := emulator.Client(t), emulator.Prefix(t)
	ledger := fsledger.New(client, idempotency.CollectionName(prefix))
	e := newEnvLedger(t, ledger, idempotency.Options{Namespace: "api-test", Development: true, Fenced: true}, func(c *api.Config) {
		st := fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithClock(c.Now))
		c.Store = st
		c.Webhooks.Deliveries = st
		// The emulator on a loaded test machine can take seconds per call
		// (a fresh one's first calls take 2–7 s); these tests are about
		// answers, not the store timeout, which TestStoreDeadline_* covers.
		c.StoreTimeout = time.Minute
	})
	e.autoKey = true
	return e
}

// TestFirestore_Routes runs every route, as every principal, on the
// Firestore store: the same statuses as on the memory store, every answer
// checked against openapi.json.
func TestFirestore_Routes(t *testing.T) {
	emulator.Host(t)
	e := newFirestoreEnv(t)
	f := setupFixtures(e)
	for _, r := range routeTable(f) {
		for _, p := range []struct{ name, key string }{{"NoKey", ""}, {"Host", e.keys.Host}, {"Billing", e.keys.Billing},
			{"Admin", e.keys.Admin}, {"Reader", e.keys.Reader}, {"OtherReader", e.keys.OtherReader}} {
			role := map[string]apikey.Role{"Host": apikey.RoleHost, "Billing": apikey.RoleBilling, "Admin": apikey.RoleAdmin,
				"Reader": apikey.RoleReader, "OtherReader": apikey.RoleReader}[p.name]
			want := expectedStatus(r, p.name, role)
			res := e.do(req{Method: r.method, Path: r.path, Key: p.key, Body: r.body, Header: r.header})
			if !slices.Contains(want, res.Status) {
				t.Errorf("%s %s as %s: status %d, want one of %v; body %s", r.method, r.path, p.name, res.Status, want, res.Body)
			}
		}
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/webhooks/stripe", Body: f.stripeEvent,
		Header: map[string]string{"Stripe-Signature": f.stripeSignature}})
}

// TestFirestore_Consume: consume, replay, conflict, denial and refused bad
// input on the Firestore store.
func TestFirestore_Consume(t *testing.T) {
	emulator.Host(t)
	e := newFirestoreEnv(t)
	id := e.grantCredits(agentA, 100)
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 60)})
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 60)})
	e.must(http.StatusUnprocessableEntity, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 61)})
	e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k2", 41)})
	e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host,
		Body: `{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k3","cost":{"cents":1.5,"currency":"USD"}}`})
	e.must(http.StatusOK, req{Method: "GET", Path: "/readyz"})
	if got := e.balance(id); got != 40 {
		t.Errorf("balance = %d, want 40", got)
	}
}
