package mcpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

// fakeStipend records consume requests and answers them with answer.
type fakeStipend struct {
	mu     sync.Mutex
	reqs   []client.ConsumeRequest
	answer func(client.ConsumeRequest) (*client.ConsumeResult, error)
}

func (f *fakeStipend) Consume(_ context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	f.mu.Lock()
	f.reqs = append(f.reqs, r)
	f.mu.Unlock()
	return f.answer(r)
}

func (f *fakeStipend) requests() []client.ConsumeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]client.ConsumeRequest(nil), f.reqs...)
}

func consumed(r client.ConsumeRequest) (*client.ConsumeResult, error) {
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c-" + r.IdempotencyKey[:12], EntitlementID: "e1", Cost: *r.Cost, Units: 1,
		BalanceAfter: money.Money{Cents: 95, Currency: "USD"},
	}}, nil
}

var prices = map[string]mcpgate.Price{
	"echo":     mcpgate.Free(),
	"forecast": mcpgate.Credits(5, "USD"),
}

// toolServer is an MCP server with a free tool (echo), a priced one
// (forecast) and one missing from the price table (unpriced); ran counts the
// tool runs. With typed set every tool declares an output schema, as tools
// added with mcp.AddTool do.
func toolServer(g *mcpgate.Gate, ran *atomic.Int32, typed bool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	schema := json.RawMessage(`{"type":"object"}`)
	var out any
	if typed {
		out = json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"],"additionalProperties":false}`)
	}
	for _, name := range []string{"echo", "forecast", "unpriced"} {
		s.AddTool(&mcp.Tool{Name: name, InputSchema: schema, OutputSchema: out}, handler)
	}
	if g != nil {
		s.AddReceivingMiddleware(g.Middleware)
	}
	return s
}

func newGate(t *testing.T, c mcpgate.Config) *mcpgate.Gate {
	t.Helper()
	if c.Service == "" {
		c.Service = "weather"
	}
	if c.Prices == nil {
		c.Prices = prices
	}
	g, err := mcpgate.New(c)
	if err != nil {
		t.Fatalf("mcpgate.New: %v", err)
	}
	return g
}

// connect serves s on an in-memory transport (wrapped with
// mcpgate.Transport) and returns a connected SDK client session.
func connect(t *testing.T, s *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), mcpgate.Transport(st), nil)
	if err != nil {
		t.Fatalf("server Connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })
	return cs
}

func callTool(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any, meta mcp.Meta) *mcp.CallToolResult {
	t.Helper()
	if meta == nil {
		meta = mcp.Meta{}
	}
	if _, ok := meta[mcpgate.MetaAgentID]; !ok {
		meta[mcpgate.MetaAgentID] = "agent-1"
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args, Meta: meta})
	if err != nil {
		t.Fatalf("CallTool(%s): %v", name, err)
	}
	return res
}

// decode re-decodes a value that went through JSON (structured content, _meta) into out.
func decode(t *testing.T, v any, out any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %v: %v", v, err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("unmarshal %s: %v", b, err)
	}
}

func TestGate_Charges(t *testing.T) {
	f := &fakeStipend{answer: consumed}
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false))

	t.Run("FreeToolIsNotCharged", func(t *testing.T) {
		res := callTool(t, cs, "echo", nil, nil)
		if res.IsError || len(f.requests()) != 0 {
			t.Errorf("echo: isError=%v after %d consume calls, want a result and none", res.IsError, len(f.requests()))
		}
	})
	t.Run("PricedToolIsChargedFirst", func(t *testing.T) {
		res := callTool(t, cs, "forecast", map[string]any{"city": "Oslo"}, nil)
		if res.IsError {
			t.Fatalf("forecast: isError result %v", res.Content)
		}
		reqs := f.requests()
		if len(reqs) != 1 {
			t.Fatalf("got %d consume calls, want 1", len(reqs))
		}
		want := client.ConsumeRequest{AgentID: "agent-1", Service: "weather", Tool: "forecast", Cost: &money.Money{Cents: 5, Currency: "USD"}}
		if diff := cmp.Diff(want, reqs[0], cmpIgnoreKey); diff != "" {
			t.Errorf("consume request (-want +got):\n%s", diff)
		}
		if k := reqs[0].IdempotencyKey; !entitlement.ValidIdempotencyKey(k) {
			t.Errorf("idempotency key %q is not valid", k)
		}
		var charge mcpgate.Charge
		decode(t, res.Meta[mcpgate.MetaConsumption], &charge)
		wantCharge := mcpgate.Charge{ConsumptionID: "c-" + reqs[0].IdempotencyKey[:12], Result: "consumed", EntitlementID: "e1",
			Cost: &money.Money{Cents: 5, Currency: "USD"}, Units: 1, BalanceAfter: &money.Money{Cents: 95, Currency: "USD"}}
		if diff := cmp.Diff(wantCharge, charge, cmp.AllowUnexported(mcpgate.Charge{})); diff != "" {
			t.Errorf("result _meta charge (-want +got):\n%s", diff)
		}
	})
	if got := ran.Load(); got != 2 {
		t.Errorf("tools ran %d times, want 2", got)
	}
}

var cmpIgnoreKey = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".IdempotencyKey" }, cmp.Ignore())

func TestGate_IdempotencyKey(t *testing.T) {
	f := &fakeStipend{answer: consumed}
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false))
	oslo := map[string]any{"city": "Oslo"}
	withKey := func(k string) mcp.Meta { return mcp.Meta{mcpgate.MetaIdempotencyKey: k} }

	callTool(t, cs, "forecast", oslo, withKey("k1"))
	callTool(t, cs, "forecast", oslo, withKey("k1")) // a retry
	callTool(t, cs, "forecast", map[string]any{"city": "Rome"}, withKey("k1"))
	callTool(t, cs, "forecast", oslo, nil) // no client key: derived from the request id
	callTool(t, cs, "forecast", oslo, nil)
	keys := []string{}
	for _, r := range f.requests() {
		keys = append(keys, r.IdempotencyKey)
	}
	if len(keys) != 5 {
		t.Fatalf("got %d consume calls, want 5", len(keys))
	}
	if keys[0] != keys[1] {
		t.Errorf("the same call with the same client key sent keys %s and %s, want one", keys[0], keys[1])
	}
	if keys[2] == keys[0] {
		t.Errorf("other arguments under the same client key sent the same key %s, want another", keys[2])
	}
	if keys[3] == keys[4] || keys[3] == keys[0] {
		t.Errorf("two calls without a client key sent keys %s and %s, want two new ones", keys[3], keys[4])
	}
}

func TestGate_Refusals(t *testing.T) {
	paymentRequired := &client.Problem{Status: 402, Reasons: []entitlement.Denial{{EntitlementID: "e1", Reason: entitlement.ReasonInsufficientBalance}}}
	unavailable := &client.NetworkError{Op: "POST /v1/consume", Err: errors.New("connection refused")}
	forecastTerms := &mcpgate.Terms{Cost: &money.Money{Cents: 5, Currency: "USD"}, Units: 1, Policy: mcpgate.PolicyBefore}
	tests := []struct {
		name     string
		cfg      mcpgate.Config
		answer   error
		tool     string
		meta     mcp.Meta
		want     mcpgate.Refusal
		wantText []string
	}{
		{
			name: "PaymentRequired", answer: paymentRequired, tool: "forecast",
			cfg: mcpgate.Config{PurchaseURL: "https://example.com/buy"},
			want: mcpgate.Refusal{Error: mcpgate.RefusalPaymentRequired, Service: "weather", Tool: "forecast",
				Price: forecastTerms, Reasons: paymentRequired.Reasons, PurchaseURL: "https://example.com/buy"},
			wantText: []string{"payment required", "5 cents USD or 1 unit", "insufficient_balance (entitlement e1)", "Buy credits at https://example.com/buy"},
		},
		{
			name: "UnavailableFailsClosed", answer: unavailable, tool: "forecast",
			want:     mcpgate.Refusal{Error: mcpgate.RefusalUnavailable, Service: "weather", Tool: "forecast", Retryable: true},
			wantText: []string{"try the call again"},
		},
		{
			name: "Conflict", answer: &client.Problem{Status: 422}, tool: "forecast",
			want:     mcpgate.Refusal{Error: mcpgate.RefusalKeyConflict, Service: "weather", Tool: "forecast"},
			wantText: []string{"idempotency key"},
		},
		{
			name: "Misconfigured", answer: &client.Problem{Status: 403}, tool: "forecast",
			want:     mcpgate.Refusal{Error: mcpgate.RefusalBillingError, Service: "weather", Tool: "forecast"},
			wantText: []string{"billing configuration error"},
		},
		{
			name: "Unpriced", tool: "unpriced",
			want:     mcpgate.Refusal{Error: mcpgate.RefusalUnpriced, Service: "weather", Tool: "unpriced"},
			wantText: []string{"no price"},
		},
		{
			name: "NoAgent", tool: "forecast", meta: mcp.Meta{mcpgate.MetaAgentID: ""},
			want:     mcpgate.Refusal{Error: mcpgate.RefusalNoAgent, Service: "weather", Tool: "forecast", Price: forecastTerms},
			wantText: []string{"which agent pays", "5 cents USD or 1 unit"},
		},
	}
	for _, tt := range tests {
		for _, typed := range []bool{false, true} {
			name := tt.name + "/NoOutputSchema"
			if typed {
				name = tt.name + "/OutputSchema"
			}
			t.Run(name, func(t *testing.T) {
				f := &fakeStipend{answer: func(client.ConsumeRequest) (*client.ConsumeResult, error) { return nil, tt.answer }}
				tt.cfg.Stipend = f
				var ran atomic.Int32
				cs := connect(t, toolServer(newGate(t, tt.cfg), &ran, typed))
				if _, err := cs.ListTools(t.Context(), nil); err != nil {
					t.Fatalf("ListTools: %v", err)
				}
				res := callTool(t, cs, tt.tool, nil, tt.meta)
				if !res.IsError {
					t.Fatalf("CallTool(%s) isError = false, want a refusal", tt.tool)
				}
				var got mcpgate.Refusal
				decode(t, res.Meta[mcpgate.MetaRefusal], &got)
				if got.Message == "" {
					t.Errorf("refusal has no message")
				}
				message := got.Message
				got.Message = ""
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("_meta refusal (-want +got):\n%s", diff)
				}
				if typed && res.StructuredContent != nil {
					t.Errorf("structuredContent = %v, want none: the tool declares an output schema", res.StructuredContent)
				}
				if !typed {
					var structured mcpgate.Refusal
					decode(t, res.StructuredContent, &structured)
					structured.Message = ""
					if diff := cmp.Diff(tt.want, structured); diff != "" {
						t.Errorf("structuredContent of a tool without an output schema (-want +_meta refusal):\n%s", diff)
					}
				}
				if len(res.Content) != 1 {
					t.Fatalf("refusal has %d contents, want one text", len(res.Content))
				}
				text := res.Content[0].(*mcp.TextContent).Text
				for _, s := range append(tt.wantText, message) {
					if !strings.Contains(text, s) {
						t.Errorf("refusal text %q does not mention %q", text, s)
					}
				}
				if got := ran.Load(); got != 0 {
					t.Errorf("tool ran %d times, want 0", got)
				}
			})
		}
	}
}

// TestGate_RefusalWithoutSession covers the middleware called directly (no
// session to list the tools through): the refusal stays out of
// structuredContent, since the tool may declare an output schema.
func TestGate_RefusalWithoutSession(t *testing.T) {
	g := newGate(t, mcpgate.Config{Stipend: &fakeStipend{answer: consumed}})
	tool := func(context.Context, string, mcp.Request) (mcp.Result, error) {
		t.Fatal("the tool ran")
		return nil, nil
	}
	res, err := g.Middleware(tool)(t.Context(), "tools/call", &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: "unpriced"}})
	if err != nil {
		t.Fatalf("middleware: %v", err)
	}
	r := res.(*mcp.CallToolResult)
	if !r.IsError || r.StructuredContent != nil || r.Meta[mcpgate.MetaRefusal] == nil {
		t.Errorf("refusal = isError %v, structuredContent %v, _meta %v; want isError, no structuredContent, a _meta refusal",
			r.IsError, r.StructuredContent, r.Meta)
	}
}

func TestGate_ListToolsShowsPrices(t *testing.T) {
	g := newGate(t, mcpgate.Config{Stipend: &fakeStipend{answer: consumed}})
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	forecastMeta := mcp.Meta{"x": 1}
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, handler)
	s.AddTool(&mcp.Tool{Name: "forecast", InputSchema: json.RawMessage(`{"type":"object"}`), Meta: forecastMeta}, handler)
	s.AddTool(&mcp.Tool{Name: "unpriced", InputSchema: json.RawMessage(`{"type":"object"}`)}, handler)
	s.AddReceivingMiddleware(g.Middleware)

	res, err := connect(t, s).ListTools(t.Context(), nil)
	if err != nil {
		t.Fatalf("ListTools: %v", err)
	}
	got := map[string]mcp.Meta{}
	for _, tool := range res.Tools {
		got[tool.Name] = tool.Meta
	}
	want := map[string]mcp.Meta{
		"echo":     {mcpgate.MetaPrice: map[string]any{"free": true}},
		"forecast": {"x": float64(1), mcpgate.MetaPrice: map[string]any{"cost": map[string]any{"cents": float64(5), "currency": "USD"}, "units": float64(1), "policy": "before"}},
		"unpriced": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools/list _meta (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(mcp.Meta{"x": 1}, forecastMeta); diff != "" {
		t.Errorf("the server's own tool _meta changed (-want +got):\n%s", diff)
	}
}

func TestGate_FailOpen(t *testing.T) {
	f := &fakeStipend{answer: func(client.ConsumeRequest) (*client.ConsumeResult, error) {
		return nil, &client.Problem{Status: 503}
	}}
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f, FailOpen: true}), &ran, false))
	res := callTool(t, cs, "forecast", nil, nil)
	if res.IsError || ran.Load() != 1 {
		t.Fatalf("fail open: isError=%v, tool ran %d times; want a result from one run", res.IsError, ran.Load())
	}
	if res.Meta[mcpgate.MetaUnbilled] != true {
		t.Errorf("result _meta %v: want %s true", res.Meta, mcpgate.MetaUnbilled)
	}
}

func TestNew_Validates(t *testing.T) {
	f := &fakeStipend{answer: consumed}
	tests := map[string]mcpgate.Config{
		"NoStipend":     {Service: "s"},
		"NoService":     {Stipend: f},
		"AnyService":    {Stipend: f, Service: "*"},
		"NegativeCost":  {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": mcpgate.Credits(-1, "USD")}},
		"BadCurrency":   {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": mcpgate.Credits(1, "usd")}},
		"TooManyUnits":  {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": mcpgate.Units(entitlement.MaxUnits + 1)}},
		"EmptyToolName": {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"": mcpgate.Units(1)}},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := mcpgate.New(c); err == nil {
				t.Errorf("mcpgate.New(%+v) succeeded, want an error", c)
			}
		})
	}
}
