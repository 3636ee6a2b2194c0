package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store/memory"
)

const agent = "agent-e2e"

// stipendKeys are raw API keys of a test Stipend server.
type stipendKeys struct{ host, billing string }

// startStipend runs the real REST service on the memory store on loopback.
func startStipend(tb testing.TB) (*httptest.Server, stipendKeys) {
	tb.Helper()
	host, hostKey, err := apikey.Generate("host", apikey.RoleHost, nil)
	if err != nil {
		tb.Fatal(err)
	}
	billing, billingKey, err := apikey.Generate("billing", apikey.RoleBilling, nil)
	if err != nil {
		tb.Fatal(err)
	}
	keys, err := apikey.NewSet([]apikey.Key{hostKey, billingKey})
	if err != nil {
		tb.Fatal(err)
	}
	signer, err := receipt.NewEphemeralKeyring()
	if err != nil {
		tb.Fatal(err)
	}
	srv, err := api.New(api.Config{Store: memory.New(), Keys: keys, Signer: signer, Development: true})
	if err != nil {
		tb.Fatalf("api.New: %v", err)
	}
	ts := httptest.NewServer(srv.Handler())
	tb.Cleanup(ts.Close)
	return ts, stipendKeys{host: host, billing: billing}
}

// billingClient is a Go client of the Stipend at url with the billing key.
func (k stipendKeys) billingClient(tb testing.TB, url string) *client.Client {
	tb.Helper()
	c, err := client.New(url, k.billing)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// connectExample serves the example server, gated by a Stipend at url, on
// in-memory transports and returns an SDK client session.
func connectExample(tb testing.TB, url, hostKey string) *mcp.ClientSession {
	tb.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := newGate(config{stipendURL: url, hostKey: hostKey, service: "weather"}, quiet,
		client.WithRetry(3, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		tb.Fatalf("newGate: %v", err)
	}
	return connectServer(tb, newServer(g))
}

func connectServer(tb testing.TB, s *mcp.Server) *mcp.ClientSession {
	tb.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(tb.Context(), mcpgate.Transport(st), nil)
	if err != nil {
		tb.Fatalf("server Connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, nil).Connect(tb.Context(), ct, nil)
	if err != nil {
		tb.Fatalf("client Connect: %v", err)
	}
	tb.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

// pay creates a payment of cents USD in credits for the weather service and
// completes it, as a billing integration does.
func pay(t *testing.T, billing *client.Client, key string, cents int64) *client.Completion {
	t.Helper()
	p, created, err := billing.CreatePayment(t.Context(), key, client.PaymentRequest{
		AgentID: agent, Amount: money.Money{Cents: cents, Currency: "USD"}, Provider: payment.ProviderManual,
		Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "weather"}},
	})
	if err != nil || !created {
		t.Fatalf("CreatePayment(%s): created=%v, %v", key, created, err)
	}
	done, err := billing.SucceedPayment(t.Context(), p.ID)
	if err != nil {
		t.Fatalf("SucceedPayment(%s): %v", p.ID, err)
	}
	if done.Payment.Status != payment.StatusSucceeded || done.Receipt.JWS == "" || len(done.Entitlements) != 1 {
		t.Fatalf("SucceedPayment(%s) = status %s, receipt %q, %d entitlements; want succeeded, a signed receipt, 1",
			p.ID, done.Payment.Status, done.Receipt.JWS, len(done.Entitlements))
	}
	return done
}

// call calls a tool as the agent, with an idempotency key if key is not empty.
func call(t *testing.T, cs *mcp.ClientSession, tool, key string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	meta := mcp.Meta{mcpgate.MetaAgentID: agent}
	if key != "" {
		meta[mcpgate.MetaIdempotencyKey] = key
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", tool, err)
	}
	return res
}

// charged returns the charge in a successful result's _meta.
func charged(t *testing.T, res *mcp.CallToolResult) mcpgate.Consumption {
	t.Helper()
	if res.IsError {
		t.Fatalf("tool result is an error: %v", res.Meta[mcpgate.MetaRefusal])
	}
	var c mcpgate.Consumption
	remarshal(t, res.Meta[mcpgate.MetaConsumption], &c)
	if c.ConsumptionID == "" {
		t.Fatalf("result _meta %v has no %s", res.Meta, mcpgate.MetaConsumption)
	}
	return c
}

func remarshal(t *testing.T, v, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(b, out)
	}
	if err != nil {
		t.Fatalf("re-decoding %v: %v", v, err)
	}
}

// refused returns the refusal of a refused call: an isError result with a
// text, and the refusal in _meta only (every example tool declares an output
// schema, which a refusal does not match).
func refused(t *testing.T, res *mcp.CallToolResult) mcpgate.Refusal {
	t.Helper()
	if !res.IsError {
		t.Fatalf("tool result is not an error, want a refusal: %v", res.StructuredContent)
	}
	if res.StructuredContent != nil {
		t.Errorf("refusal has structuredContent %v, want none (the tool has an output schema)", res.StructuredContent)
	}
	if len(res.Content) != 1 {
		t.Fatalf("refusal has %d contents, want one text", len(res.Content))
	}
	var r mcpgate.Refusal
	remarshal(t, res.Meta[mcpgate.MetaRefusal], &r)
	if text := res.Content[0].(*mcp.TextContent).Text; r.Message == "" || !strings.Contains(text, r.Message) {
		t.Errorf("refusal text %q does not contain its message %q", text, r.Message)
	}
	return r
}

func usd(cents int64) *money.Money { return &money.Money{Cents: cents, Currency: "USD"} }

func TestPaidTools_EndToEnd(t *testing.T) {
	ts, keys := startStipend(t)
	billing := keys.billingClient(t, ts.URL)
	cs := connectExample(t, ts.URL, keys.host)
	oslo := map[string]any{"city": "Oslo"}

	first := pay(t, billing, "pay-1", 10)

	// An allowed call consumes.
	c1 := charged(t, call(t, cs, "forecast", "call-1", oslo))
	if c1.Result != client.ResultConsumed || c1.EntitlementID != first.Entitlements[0].ID {
		t.Errorf("first call charge = %+v, want consumed from %s", c1, first.Entitlements[0].ID)
	}
	if diff := cmp.Diff(usd(5), c1.BalanceAfter); diff != "" {
		t.Errorf("balance after the first call (-want +got):\n%s", diff)
	}

	// The same call retried with the same key is not charged again.
	c1again := charged(t, call(t, cs, "forecast", "call-1", oslo))
	if c1again.Result != client.ResultReplay || c1again.ConsumptionID != c1.ConsumptionID {
		t.Errorf("retried call charge = %s %s, want replay of %s", c1again.Result, c1again.ConsumptionID, c1.ConsumptionID)
	}
	e, err := billing.GetEntitlement(t.Context(), first.Entitlements[0].ID)
	if err != nil {
		t.Fatalf("GetEntitlement: %v", err)
	}
	if got, want := e.Credits.Balance, *usd(5); got != want {
		t.Errorf("balance after the retry = %v, want %v", got, want)
	}

	// A call without a key (derived from the request id) spends the rest.
	if c := charged(t, call(t, cs, "forecast", "", map[string]any{"city": "Rome"})); c.BalanceAfter.Cents != 0 {
		t.Errorf("balance after the second call = %v, want 0", c.BalanceAfter)
	}

	// With the credits gone, the call is refused with payment required.
	refusal := refused(t, call(t, cs, "forecast", "call-3", oslo))
	wantReasons := []entitlement.Denial{{EntitlementID: first.Entitlements[0].ID, Reason: entitlement.ReasonInsufficientBalance}}
	if refusal.Error != mcpgate.RefusalPaymentRequired || !cmp.Equal(wantReasons, refusal.Reasons) {
		t.Errorf("refusal = %s %v, want %s %v", refusal.Error, refusal.Reasons, mcpgate.RefusalPaymentRequired, wantReasons)
	}
	if want := (mcpgate.Terms{Cost: usd(5), Units: 1, Policy: mcpgate.PolicyOnSuccess}); !cmp.Equal(&want, refusal.Price) {
		t.Errorf("refusal price = %+v, want %+v", refusal.Price, want)
	}
	if echo := call(t, cs, "echo", "", map[string]any{"text": "hi"}); echo.IsError {
		t.Errorf("the free tool is refused too: %v", echo.Content)
	}

	// A payment tops the agent up, and the refused call then succeeds.
	second := pay(t, billing, "pay-2", 50)
	c3 := charged(t, call(t, cs, "forecast", "call-3", oslo))
	if c3.Result != client.ResultConsumed || c3.EntitlementID != second.Entitlements[0].ID || !cmp.Equal(usd(45), c3.BalanceAfter) {
		t.Errorf("call after the top-up = %s from %s leaving %v, want consumed from %s leaving 45 USD",
			c3.Result, c3.EntitlementID, c3.BalanceAfter, second.Entitlements[0].ID)
	}
	c4 := charged(t, call(t, cs, "history", "", map[string]any{"city": "Oslo", "year": 1990}))
	if !cmp.Equal(usd(25), c4.BalanceAfter) {
		t.Errorf("balance after history = %v, want 25 USD", c4.BalanceAfter)
	}

	list, err := billing.ListConsumptions(t.Context(), agent, time.Time{}, client.Page{})
	if err != nil {
		t.Fatalf("ListConsumptions: %v", err)
	}
	var total int64
	for _, c := range list.Items {
		total += c.Cost.Cents
	}
	if len(list.Items) != 4 || total != 35 {
		t.Errorf("consumptions: %d charging %d cents, want 4 charging 35 (the retry charged nothing)", len(list.Items), total)
	}

	// Stipend unreachable: the gate fails closed.
	ts.Close()
	refusal = refused(t, call(t, cs, "forecast", "call-5", oslo))
	if refusal.Error != mcpgate.RefusalUnavailable || !refusal.Retryable {
		t.Errorf("call with Stipend down = %s retryable=%v; want a retryable %s refusal",
			refusal.Error, refusal.Retryable, mcpgate.RefusalUnavailable)
	}
}

// TestPaidTools_ChargedOnSuccess shows the example's tools charged for the
// work they do: a call whose tool fails is not charged, and hourly is
// charged the hours it forecast, not its price.
func TestPaidTools_ChargedOnSuccess(t *testing.T) {
	ts, keys := startStipend(t)
	billing := keys.billingClient(t, ts.URL)
	funded := pay(t, billing, "pay-on-success", 50)
	cs := connectExample(t, ts.URL, keys.host)
	balance := func() int64 {
		t.Helper()
		e, err := billing.GetEntitlement(t.Context(), funded.Entitlements[0].ID)
		if err != nil {
			t.Fatalf("GetEntitlement: %v", err)
		}
		if e.Credits.Held.Cents != 0 {
			t.Errorf("%d cents still held, want none", e.Credits.Held.Cents)
		}
		return e.Credits.Balance.Cents
	}

	for _, failing := range []struct {
		tool string
		args map[string]any
	}{
		{"history", map[string]any{"city": "Oslo", "year": 1900}},
		{"hourly", map[string]any{"city": "Oslo", "hours": 30}},
		{"forecast", map[string]any{}}, // fails the input schema
	} {
		res := call(t, cs, failing.tool, "", failing.args)
		if !res.IsError || res.Meta[mcpgate.MetaConsumption] != nil {
			t.Errorf("%s%v = isError %v, _meta %v; want the tool's error and no charge", failing.tool, failing.args, res.IsError, res.Meta)
		}
	}
	if got := balance(); got != 50 {
		t.Errorf("balance after three failed calls = %d cents, want 50", got)
	}

	c := charged(t, call(t, cs, "hourly", "", map[string]any{"city": "Oslo", "hours": 6}))
	if !cmp.Equal(usd(6), c.Cost) || !cmp.Equal(usd(44), c.BalanceAfter) || c.HoldID == "" {
		t.Errorf("6 hours charged %v leaving %v (hold %q), want 6 cents leaving 44, from a hold", c.Cost, c.BalanceAfter, c.HoldID)
	}
	if got := balance(); got != 44 {
		t.Errorf("balance = %d cents, want 44", got)
	}
}

func TestPaidTools_StreamableHTTP(t *testing.T) {
	ts, keys := startStipend(t)
	billing := keys.billingClient(t, ts.URL)
	pay(t, billing, "pay-http", 10)
	transport := &mcp.StreamableClientTransport{Endpoint: "http://" + serveExample(t, ts.URL, keys.host, nil) + "/mcp"}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-http", Version: "1"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })

	oslo := map[string]any{"city": "Oslo"}
	first := charged(t, call(t, cs, "forecast", "", oslo))
	again := charged(t, call(t, cs, "forecast", "", oslo))
	if first.ConsumptionID == again.ConsumptionID || !cmp.Equal(usd(0), again.BalanceAfter) {
		t.Errorf("two calls without a key = %s then %s leaving %v; want two charges leaving 0", first.ConsumptionID, again.ConsumptionID, again.BalanceAfter)
	}
	if r := refused(t, call(t, cs, "forecast", "", oslo)); r.Error != mcpgate.RefusalPaymentRequired {
		t.Errorf("third call with no credits: refusal %s, want %s", r.Error, mcpgate.RefusalPaymentRequired)
	}
}

// serveExample serves the example as streamable HTTP with opts, gated and
// charging the Stipend at stipendURL, until the test ends; it returns the
// address it listens on.
func serveExample(t *testing.T, stipendURL, hostKey string, opts *mcp.StreamableHTTPOptions) string {
	t.Helper()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	g, err := newGate(config{stipendURL: stipendURL, hostKey: hostKey, service: "weather"}, quiet)
	if err != nil {
		t.Fatalf("newGate: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	served := make(chan error, 1)
	go func() { served <- serveHTTP(ctx, ln, newServer(g), opts, quiet) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serveHTTP: %v", err)
		}
	})
	return ln.Addr().String()
}

// TestPaidTools_ConcurrentCallsNeverOverspend runs 20 concurrent paid calls
// against credits for exactly 10: 10 are charged and run, 10 are refused,
// and the balance ends at zero.
func TestPaidTools_ConcurrentCallsNeverOverspend(t *testing.T) {
	ts, keys := startStipend(t)
	billing := keys.billingClient(t, ts.URL)
	funded := pay(t, billing, "pay-concurrent", 50)
	cs := connectExample(t, ts.URL, keys.host)

	const calls = 20
	results := make(chan *mcp.CallToolResult, calls)
	errs := make(chan error, calls)
	for i := range calls {
		go func() {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "forecast",
				Arguments: map[string]any{"city": "Oslo"}, Meta: mcp.Meta{mcpgate.MetaAgentID: agent,
					mcpgate.MetaIdempotencyKey: fmt.Sprintf("concurrent-%d", i)}})
			results <- res
			errs <- err
		}()
	}
	var ok, denied int
	for range calls {
		if err := <-errs; err != nil {
			t.Fatalf("CallTool: %v", err)
		}
		res := <-results
		if !res.IsError {
			ok++
			continue
		}
		if refusal := refused(t, res); refusal.Error != mcpgate.RefusalPaymentRequired {
			t.Errorf("unexpected refusal %+v", refusal)
		}
		denied++
	}
	if ok != 10 || denied != 10 {
		t.Errorf("%d calls charged and %d refused, want 10 and 10", ok, denied)
	}
	e, err := billing.GetEntitlement(t.Context(), funded.Entitlements[0].ID)
	if err != nil || e.Credits.Balance.Cents != 0 {
		t.Errorf("balance = %v, %v; want 0", e.Credits.Balance, err)
	}
}
