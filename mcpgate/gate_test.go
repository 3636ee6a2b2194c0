package mcpgate_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

// fakeStipend answers every call at once, as Stipend would for an agent
// with credits, unless err is set: then consumes and authorizes fail with
// it. It records the requests.
type fakeStipend struct {
	err error

	mu         sync.Mutex
	ops        []string // "consume", "authorize", "capture", "release", "get", in order
	consumes   []client.ConsumeRequest
	authorizes []client.AuthorizeRequest
	captures   []client.CaptureRequest
}

func (f *fakeStipend) record(op string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
}

// keep records op and appends its request r to list.
func keep[R any](f *fakeStipend, op string, list *[]R, r R) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
	*list = append(*list, r)
}

func (f *fakeStipend) Consume(_ context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	keep(f, "consume", &f.consumes, r)
	if f.err != nil {
		return nil, f.err
	}
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c-" + r.IdempotencyKey[:12], EntitlementID: "e1", Cost: *r.Cost, Units: 1,
		BalanceAfter: money.Money{Cents: 95, Currency: "USD"},
	}}, nil
}

func (f *fakeStipend) Authorize(_ context.Context, r client.AuthorizeRequest) (*client.HoldResult, error) {
	keep(f, "authorize", &f.authorizes, r)
	if f.err != nil {
		return nil, f.err
	}
	return &client.HoldResult{Result: client.ResultHeld, Hold: entitlement.Hold{
		ID: "h-" + r.IdempotencyKey[:12], AgentID: r.AgentID, EntitlementID: "e1", EntitlementType: entitlement.TypeCredits,
		Status: entitlement.HoldOpen, MaxCost: *r.MaxCost, MaxUnits: 1,
	}}, nil
}

func (f *fakeStipend) CaptureHold(_ context.Context, id string, r client.CaptureRequest) (*client.CaptureResult, error) {
	keep(f, "capture", &f.captures, r)
	cost := money.Money{Cents: 5, Currency: "USD"}
	if r.Cost != nil {
		cost = *r.Cost
	}
	return &client.CaptureResult{Result: client.ResultCaptured, Consumption: entitlement.Consumption{
		ID: "c-" + id, EntitlementID: "e1", HoldID: id, Cost: cost, Units: 1,
		BalanceAfter: money.Money{Cents: 100 - cost.Cents, Currency: "USD"},
	}}, nil
}

func (f *fakeStipend) ReleaseHold(_ context.Context, id, _ string) (*client.HoldResult, error) {
	f.record("release")
	return &client.HoldResult{Result: client.ResultReleased, Hold: entitlement.Hold{ID: id, Status: entitlement.HoldReleased}}, nil
}

func (f *fakeStipend) GetHold(_ context.Context, id string) (*entitlement.Hold, error) {
	f.record("get")
	return &entitlement.Hold{ID: id, Status: entitlement.HoldOpen}, nil
}

// keys returns the idempotency keys of the consumes and authorizes, in
// order, and fails t unless there are n.
func (f *fakeStipend) keys(t *testing.T, n int) []string {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	var keys []string
	for _, r := range f.consumes {
		keys = append(keys, r.IdempotencyKey)
	}
	for _, r := range f.authorizes {
		keys = append(keys, r.IdempotencyKey)
	}
	if len(keys) != n {
		t.Fatalf("got %d consume and authorize calls, want %d", len(keys), n)
	}
	return keys
}

func (f *fakeStipend) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

var prices = map[string]mcpgate.Price{
	"echo":     mcpgate.Free(),
	"forecast": mcpgate.Credits(5, "USD"),
	"alert":    mcpgate.Credits(5, "USD").ChargedBefore(),
}

// toolServer is an MCP server with a free tool (echo), a priced one charged
// on success (forecast), one charged before it runs (alert) and one missing
// from the price table (unpriced); ran counts the tool runs. With typed set every tool declares an output schema, as tools
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
	for _, name := range []string{"echo", "forecast", "alert", "unpriced"} {
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
func connect(tb testing.TB, s *mcp.Server) *mcp.ClientSession {
	tb.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(tb.Context(), mcpgate.Transport(st), nil)
	if err != nil {
		tb.Fatalf("server Connect: %v", err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(tb.Context(), ct, nil)
	if err != nil {
		tb.Fatalf("client Connect: %v", err)
	}
	tb.Cleanup(func() { cs.Close(); ss.Close() })
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
	f := &fakeStipend{}
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false))
	usd5 := &money.Money{Cents: 5, Currency: "USD"}

	t.Run("FreeToolIsNotCharged", func(t *testing.T) {
		res := callTool(t, cs, "echo", nil, nil)
		if res.IsError || len(f.calls()) != 0 {
			t.Errorf("echo: isError=%v after Stipend calls %v, want a result and none", res.IsError, f.calls())
		}
	})
	t.Run("OnSuccessIsHeldThenCaptured", func(t *testing.T) {
		res := callTool(t, cs, "forecast", map[string]any{"city": "Oslo"}, nil)
		if res.IsError {
			t.Fatalf("forecast: isError result %v", res.Content)
		}
		if diff := cmp.Diff([]string{"authorize", "capture"}, f.calls()); diff != "" {
			t.Fatalf("Stipend calls (-want +got):\n%s", diff)
		}
		want := client.AuthorizeRequest{AgentID: "agent-1", Service: "weather", Tool: "forecast", MaxCost: usd5,
			TTLSeconds: int64(entitlement.DefaultHoldTTL / time.Second)}
		if diff := cmp.Diff(want, f.authorizes[0], cmpIgnoreKey); diff != "" {
			t.Errorf("authorize request (-want +got):\n%s", diff)
		}
		key := f.authorizes[0].IdempotencyKey
		if !entitlement.ValidIdempotencyKey(key) {
			t.Errorf("idempotency key %q is not valid", key)
		}
		if diff := cmp.Diff(client.CaptureRequest{AgentID: "agent-1"}, f.captures[0]); diff != "" {
			t.Errorf("capture request, the price (-want +got):\n%s", diff)
		}
		var got mcpgate.Consumption
		decode(t, res.Meta[mcpgate.MetaConsumption], &got)
		hold := "h-" + key[:12]
		wantCharge := mcpgate.Consumption{ConsumptionID: "c-" + hold, Result: "consumed", HoldID: hold, EntitlementID: "e1",
			Cost: usd5, Units: 1, BalanceAfter: &money.Money{Cents: 95, Currency: "USD"}}
		if diff := cmp.Diff(wantCharge, got); diff != "" {
			t.Errorf("result _meta consumption (-want +got):\n%s", diff)
		}
	})
	t.Run("BeforeIsConsumedFirst", func(t *testing.T) {
		res := callTool(t, cs, "alert", nil, nil)
		if res.IsError {
			t.Fatalf("alert: isError result %v", res.Content)
		}
		if diff := cmp.Diff([]string{"authorize", "capture", "consume"}, f.calls()); diff != "" {
			t.Fatalf("Stipend calls (-want +got):\n%s", diff)
		}
		want := client.ConsumeRequest{AgentID: "agent-1", Service: "weather", Tool: "alert", Cost: usd5}
		if diff := cmp.Diff(want, f.consumes[0], cmpIgnoreKey); diff != "" {
			t.Errorf("consume request (-want +got):\n%s", diff)
		}
		var got mcpgate.Consumption
		decode(t, res.Meta[mcpgate.MetaConsumption], &got)
		wantCharge := mcpgate.Consumption{ConsumptionID: "c-" + f.consumes[0].IdempotencyKey[:12], Result: "consumed", EntitlementID: "e1",
			Cost: usd5, Units: 1, BalanceAfter: &money.Money{Cents: 95, Currency: "USD"}}
		if diff := cmp.Diff(wantCharge, got); diff != "" {
			t.Errorf("result _meta consumption (-want +got):\n%s", diff)
		}
	})
	if got := ran.Load(); got != 3 {
		t.Errorf("tools ran %d times, want 3", got)
	}
}

var cmpIgnoreKey = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".IdempotencyKey" }, cmp.Ignore())

func TestGate_IdempotencyKey(t *testing.T) {
	f := &fakeStipend{}
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false))
	oslo := map[string]any{"city": "Oslo"}
	withKey := func(k string) mcp.Meta { return mcp.Meta{mcpgate.MetaIdempotencyKey: k} }

	callTool(t, cs, "forecast", oslo, withKey("k1"))
	callTool(t, cs, "forecast", oslo, withKey("k1")) // a retry
	callTool(t, cs, "forecast", map[string]any{"city": "Rome"}, withKey("k1"))
	callTool(t, cs, "forecast", oslo, nil) // no client key: derived from the request id
	callTool(t, cs, "forecast", oslo, nil)
	keys := f.keys(t, 5)
	if keys[0] != keys[1] {
		t.Errorf("the same call with the same client key sent keys %s and %s, want one", keys[0], keys[1])
	}
	if keys[2] == keys[0] {
		t.Errorf("other arguments under the same client key sent the same key %s, want another", keys[2])
	}
	if keys[3] == keys[4] || keys[3] == keys[0] {
		t.Errorf("two calls without a client key sent keys %s and %s, want two new ones", keys[3], keys[4])
	}

	// The round that continues a call after an input-required result carries
	// requestState: under the same client key it is another charge.
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "forecast", Arguments: oslo, RequestState: "round-2",
		Meta: mcp.Meta{mcpgate.MetaAgentID: "agent-1", mcpgate.MetaIdempotencyKey: "k1"}})
	if err != nil || res.IsError {
		t.Fatalf("CallTool with requestState: %v %v", res, err)
	}
	if keys = f.keys(t, 6); keys[5] == keys[0] {
		t.Errorf("the second round of a call under client key k1 sent the first round's key %s, want its own", keys[5])
	}
}

func TestGate_Refusals(t *testing.T) {
	paymentRequired := &client.Problem{Status: 402, Reasons: []entitlement.Denial{{EntitlementID: "e1", Reason: entitlement.ReasonInsufficientBalance}}}
	unavailable := &client.NetworkError{Op: "POST /v1/consume", Err: errors.New("connection refused")}
	forecastTerms := &mcpgate.Terms{Cost: &money.Money{Cents: 5, Currency: "USD"}, Units: 1, Policy: mcpgate.PolicyOnSuccess}
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
			wantText: []string{"payment required", "at most 5 cents USD or 1 unit, charged only if the tool succeeds",
				"insufficient_balance (entitlement e1)", "Buy credits at https://example.com/buy"},
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
				f := &fakeStipend{err: tt.answer}
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
	g := newGate(t, mcpgate.Config{Stipend: &fakeStipend{}})
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
	g := newGate(t, mcpgate.Config{Stipend: &fakeStipend{}})
	s := mcp.NewServer(&mcp.Implementation{Name: "tools", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	}
	forecastMeta := mcp.Meta{"x": 1}
	s.AddTool(&mcp.Tool{Name: "echo", InputSchema: json.RawMessage(`{"type":"object"}`)}, handler)
	s.AddTool(&mcp.Tool{Name: "forecast", InputSchema: json.RawMessage(`{"type":"object"}`), Meta: forecastMeta}, handler)
	s.AddTool(&mcp.Tool{Name: "alert", InputSchema: json.RawMessage(`{"type":"object"}`)}, handler)
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
		"forecast": {"x": float64(1), mcpgate.MetaPrice: map[string]any{"cost": map[string]any{"cents": float64(5), "currency": "USD"}, "units": float64(1), "policy": "on_success"}},
		"alert":    {mcpgate.MetaPrice: map[string]any{"cost": map[string]any{"cents": float64(5), "currency": "USD"}, "units": float64(1), "policy": "before"}},
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
	f := &fakeStipend{err: &client.Problem{Status: 503}}
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f, FailOpen: true}), &ran, false))
	for _, tool := range []string{"forecast", "alert"} {
		res := callTool(t, cs, tool, nil, nil)
		if res.IsError {
			t.Fatalf("fail open: %s isError %v", tool, res.Content)
		}
		if res.Meta[mcpgate.MetaUnbilled] != true {
			t.Errorf("%s result _meta %v: want %s true", tool, res.Meta, mcpgate.MetaUnbilled)
		}
	}
	if got := ran.Load(); got != 2 {
		t.Errorf("tools ran %d times, want 2", got)
	}
	if diff := cmp.Diff([]string{"authorize", "consume"}, f.calls()); diff != "" {
		t.Errorf("Stipend calls (-want +got):\n%s", diff)
	}
}

func TestNew_Validates(t *testing.T) {
	f := &fakeStipend{}
	tests := map[string]mcpgate.Config{
		"NoStipend":       {Service: "s"},
		"NoService":       {Stipend: f},
		"AnyService":      {Stipend: f, Service: "*"},
		"NegativeCost":    {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": mcpgate.Credits(-1, "USD")}},
		"BadCurrency":     {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": mcpgate.Credits(1, "usd")}},
		"TooManyUnits":    {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": mcpgate.Units(entitlement.MaxUnits + 1)}},
		"EmptyToolName":   {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"": mcpgate.Units(1)}},
		"UnknownPolicy":   {Stipend: f, Service: "s", Prices: map[string]mcpgate.Price{"t": {Units: 1, Policy: "after"}}},
		"HoldTTLTooLong":  {Stipend: f, Service: "s", HoldTTL: entitlement.MaxHoldTTL + time.Second},
		"HoldTTLNegative": {Stipend: f, Service: "s", HoldTTL: -time.Second},
		"HoldTTLFraction": {Stipend: f, Service: "s", HoldTTL: 1500 * time.Millisecond},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := mcpgate.New(c); err == nil {
				t.Errorf("mcpgate.New(%+v) succeeded, want an error", c)
			}
		})
	}
}
