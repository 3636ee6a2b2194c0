package api_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
)

// Agents the test keys know: the reader key may read agentA only.
const (
	agentA = "agent-a"
	agentB = "agent-b"
)

// testKeys holds one raw key per role, plus a reader of another agent.
type testKeys struct {
	Host, Billing, Admin, Reader, OtherReader string
}

var (
	keysOnce sync.Once
	keysRaw  testKeys
	keySet   *apikey.Set
)

func makeKeys(tb testing.TB) (testKeys, *apikey.Set) {
	tb.Helper()
	keysOnce.Do(func() {
		var entries []apikey.Key
		gen := func(id string, role apikey.Role, agents ...string) string {
			raw, k, err := apikey.Generate(id, role, agents)
			if err != nil {
				panic(err)
			}
			entries = append(entries, k)
			return raw
		}
		keysRaw = testKeys{
			Host:        gen("host", apikey.RoleHost),
			Billing:     gen("billing", apikey.RoleBilling),
			Admin:       gen("admin", apikey.RoleAdmin),
			Reader:      gen("reader", apikey.RoleReader, agentA, walletW),
			OtherReader: gen("reader-other", apikey.RoleReader, "someone-else"),
		}
		s, err := apikey.NewSet(entries)
		if err != nil {
			panic(err)
		}
		keySet = s
	})
	return keysRaw, keySet
}

// env is a server on a fresh memory store.
type env struct {
	t      testing.TB
	srv    *api.Server
	store  store.EntitlementStore
	keys   testKeys
	signer *receipt.Keyring
	clock  *conformance.Clock
	reg    *prometheus.Registry
	// noSpec turns off checking every response against openapi.json.
	noSpec bool
	// autoKey gives requests to the ledger's routes an Idempotency-Key
	// when they have none (see newEnv).
	autoKey bool
	// seen, if set, records "operationId status" of every checked response.
	seen *sync.Map
}

// testStripeSecret verifies Stripe events in the default test server.
const testStripeSecret = "whsec_api_test_default"

type option func(*api.Config)

// newEnv returns a server configured as `stipend serve` configures one:
// its key-requiring routes (api.LedgerRoutes) go through an idempotency
// ledger (in memory). Requests to those routes that set no Idempotency-Key
// get a fresh one from env.do, so tests about other things need not.
func newEnv(tb testing.TB, opts ...option) *env {
	tb.Helper()
	e := newEnvWith(tb, memledger.New("api-test"), opts...)
	e.autoKey = true
	return e
}

// newEnvWith is newEnv with the given ledger and no automatic keys: every
// request is sent as the test wrote it. The ledger is not fenced, so a
// test may pair any store with any ledger; newEnvLedger sets options.
func newEnvWith(tb testing.TB, ledger idempotency.Ledger, opts ...option) *env {
	tb.Helper()
	return newEnvLedger(tb, ledger, idempotency.Options{Namespace: "api-test", Development: true}, opts...)
}

// newEnvLedger is newEnvWith with the ledger's options given.
func newEnvLedger(tb testing.TB, ledger idempotency.Ledger, ledgerOpts idempotency.Options, opts ...option) *env {
	tb.Helper()
	keys, set := makeKeys(tb)
	clk := conformance.NewClock()
	clk.Set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	signer, err := receipt.NewEphemeralKeyring()
	if err != nil {
		tb.Fatal(err)
	}
	st := memory.New(memory.WithClock(clk.Now))
	reg := prometheus.NewRegistry()
	cfg := api.Config{Store: st, Keys: set, Signer: signer, Issuer: "stipend-test", Now: clk.Now, Registry: reg,
		CORSOrigins: []string{"https://ui.example"}, Webhooks: &api.WebhookConfig{StripeSecret: testStripeSecret, Deliveries: st}}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := api.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	srv.UseLedger(ledger, ledgerOpts)
	return &env{t: tb, srv: srv, store: cfg.Store, keys: keys, signer: signer, clock: clk, reg: reg}
}

// ledgerRoute matches the concrete paths of api.LedgerRoutes, as "METHOD path".
var ledgerRoute = func() *regexp.Regexp {
	alts := make([]string, len(api.LedgerRoutes))
	for i, r := range api.LedgerRoutes {
		alts[i] = regexp.MustCompile(`:[A-Za-z]+`).ReplaceAllString(regexp.QuoteMeta(r), `[^/]+`)
	}
	return regexp.MustCompile(`^(?:` + strings.Join(alts, "|") + `)$`)
}()

// with returns a copy of e that reports to tb (a subtest or fuzz target).
func (e *env) with(tb testing.TB) *env {
	c := *e
	c.t = tb
	return &c
}

// response is a recorded answer.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// problem decodes a problem+json answer.
func (r response) problem(tb testing.TB) problem.Problem {
	tb.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		tb.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %s)", ct, r.Status, r.Body)
	}
	var p problem.Problem
	if err := json.Unmarshal(r.Body, &p); err != nil {
		tb.Fatalf("problem body %s: %v", r.Body, err)
	}
	return p
}

// checkRequestID: every problem names the request ID its response carries.
func checkRequestID(tb testing.TB, r response) {
	tb.Helper()
	var p problem.Problem
	if r.Header.Get("Content-Type") != "application/problem+json" || json.Unmarshal(r.Body, &p) != nil {
		return
	}
	if id := r.Header.Get(api.HeaderRequestID); p.RequestID == "" || p.RequestID != id {
		tb.Errorf("problem %s: requestId %q, want the response's %s %q", p.Type, p.RequestID, api.HeaderRequestID, id)
	}
}

// decode decodes a JSON answer into v.
func (r response) decode(tb testing.TB, v any) {
	tb.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		tb.Fatalf("body %s: %v", r.Body, err)
	}
}

// req is one request to send.
type req struct {
	Method, Path, Key string
	// Body is sent as is when a string or []byte, else JSON-encoded.
	Body   any
	Header map[string]string
	// Values adds header values (several for one name), after Header.
	Values http.Header
}

func (e *env) do(r req) response {
	e.t.Helper()
	var body io.Reader
	switch b := r.Body.(type) {
	case nil:
	case string:
		body = strings.NewReader(b)
	case []byte:
		body = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			e.t.Fatal(err)
		}
		body = bytes.NewReader(j)
	}
	hr := httptest.NewRequest(r.Method, r.Path, body)
	if body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	if r.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+r.Key)
	}
	for k, v := range r.Header {
		hr.Header.Set(k, v)
	}
	for k, vs := range r.Values {
		for _, v := range vs {
			hr.Header.Add(k, v)
		}
	}
	if e.autoKey && hr.Header.Get(idempotency.HeaderKey) == "" && ledgerRoute.MatchString(r.Method+" "+hr.URL.EscapedPath()) {
		hr.Header.Set(idempotency.HeaderKey, uuid.NewString())
	}
	rec := httptest.NewRecorder()
	var reqBody []byte
	if !e.noSpec && body != nil {
		reqBody, _ = io.ReadAll(hr.Body)
		hr.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	e.srv.Handler().ServeHTTP(rec, hr)
	res := rec.Result()
	out := response{Status: res.StatusCode, Header: res.Header, Body: rec.Body.Bytes()}
	checkRequestID(e.t, out)
	if !e.noSpec {
		hr.Body = io.NopCloser(bytes.NewReader(reqBody))
		checkSpec(e.t, hr, res, out.Body, e.seen)
	}
	return out
}

// must sends r and fails the test unless the status is want.
func (e *env) must(want int, r req) response {
	e.t.Helper()
	res := e.do(r)
	if res.Status != want {
		e.t.Fatalf("%s %s: status %d, want %d; body %s", r.Method, r.Path, res.Status, want, res.Body)
	}
	return res
}

// grantCredits gives agent a credits entitlement of cents USD and returns its ID.
func (e *env) grantCredits(agent string, cents int64) string {
	e.t.Helper()
	res := e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agent + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "credits", "scope": map[string]any{"service": "search"},
			"balance": map[string]any{"cents": cents, "currency": "USD"}}})
	var out struct{ ID string }
	res.decode(e.t, &out)
	return out.ID
}

// consumeBody is a consume request for agent with key costing cents USD.
func consumeBody(agent, key string, cents int64) map[string]any {
	return map[string]any{"agentId": agent, "service": "search", "tool": "web", "idempotencyKey": key,
		"cost": map[string]any{"cents": cents, "currency": "USD"}}
}

// balance returns the current balance of a credits entitlement.
func (e *env) balance(id string) int64 {
	e.t.Helper()
	var out struct {
		Credits struct{ Balance struct{ Cents int64 } }
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/entitlements/" + id, Key: e.keys.Admin}).decode(e.t, &out)
	return out.Credits.Balance.Cents
}
