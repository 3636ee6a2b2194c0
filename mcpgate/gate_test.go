package mcpgate_test

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"slices"
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

// recorder is the gate's Biller in these tests: a real Stipend client (a
// host key of the real service startStipend runs, or of a closed port for
// the tests of an unreachable Stipend) that records each call and its
// request before the call goes to the service.
type recorder struct {
	c *client.Client

	mu         sync.Mutex
	ops        []string // "consume", "authorize", "capture", "release", "get", in order
	consumes   []client.ConsumeRequest
	authorizes []client.AuthorizeRequest
	captures   []client.CaptureRequest
}

// record notes op and appends its request r to list (nil: none).
func record[R any](f *recorder, op string, list *[]R, r R) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
	if list != nil {
		*list = append(*list, r)
	}
}

func (f *recorder) Consume(ctx context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	record(f, "consume", &f.consumes, r)
	return f.c.Consume(ctx, r)
}

func (f *recorder) Authorize(ctx context.Context, r client.AuthorizeRequest) (*client.HoldResult, error) {
	record(f, "authorize", &f.authorizes, r)
	return f.c.Authorize(ctx, r)
}

func (f *recorder) CaptureHold(ctx context.Context, id string, r client.CaptureRequest) (*client.CaptureResult, error) {
	record(f, "capture", &f.captures, r)
	return f.c.CaptureHold(ctx, id, r)
}

func (f *recorder) ReleaseHold(ctx context.Context, id, agentID string) (*client.HoldResult, error) {
	record[string](f, "release", nil, "")
	return f.c.ReleaseHold(ctx, id, agentID)
}

func (f *recorder) GetHold(ctx context.Context, id string) (*entitlement.Hold, error) {
	record[string](f, "get", nil, "")
	return f.c.GetHold(ctx, id)
}

// keys returns the idempotency keys of the consumes and authorizes, in
// order, and fails t unless there are n.
func (f *recorder) keys(t *testing.T, n int) []string {
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

func (f *recorder) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.ops...)
}

// derivedKey is the idempotency key the gate sends for a call of tool by
// agent-1 with no arguments and meta (which must carry a client key, so the
// key does not depend on the session): learnt from a gate whose Stipend
// cannot be reached, which refuses the call after sending it.
func derivedKey(t *testing.T, tool string, meta mcp.Meta) string {
	t.Helper()
	f := unreachable(t)
	var ran atomic.Int32
	callTool(t, connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false)), tool, nil, maps.Clone(meta))
	return f.keys(t, 1)[0]
}

// funded starts a real Stipend where agent-1 has 100 cents USD of credits
// for the weather service, and returns it with a recorder of its host key.
func funded(t *testing.T) (*stipend, *recorder, *entitlement.Entitlement) {
	t.Helper()
	s := startStipend(t)
	e := s.grantCredits(t, "agent-1", 100)
	return s, s.recorder(t, s.hostKey), e
}

// recorder returns a recorder of a client of s with the API key key.
func (s *stipend) recorder(tb testing.TB, key string) *recorder {
	tb.Helper()
	return &recorder{c: newClient(tb, s.url, key)}
}

// newClient is a client of the Stipend at url with key that retries fast.
func newClient(tb testing.TB, url, key string) *client.Client {
	tb.Helper()
	c, err := client.New(url, key, client.WithRetry(3, time.Millisecond, 10*time.Millisecond))
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// unreachable is a recorder of a Stipend that cannot be reached: a
// loopback port nothing listens on any more.
func unreachable(t *testing.T) *recorder {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close()
	return &recorder{c: newClient(t, url, "unused")}
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
	st, f, e := funded(t)
	var ran atomic.Int32
	cs := connect(t, toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false))
	usd5 := &money.Money{Cents: 5, Currency: "USD"}

	t.Run("FreeToolIsNotCharged", func(t *testing.T) {
		res := callTool(t, cs, "echo", nil, nil)
		if res.IsError || len(f.calls()) != 0 {
			t.Errorf("echo: isError=%v after Stipend calls %v, want a result and none", res.IsError, f.calls())
		}
		st.wantCredits(t, e.ID, 100, 0)
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
		charged := st.consumptionByKey(t, "agent-1", key)
		if charged.HoldID == "" {
			t.Errorf("the consumption of key %s names no hold: the call was not held and captured", key)
		}
		wantCharge := mcpgate.Consumption{ConsumptionID: charged.ID, Result: "consumed", HoldID: charged.HoldID, EntitlementID: e.ID,
			Cost: usd5, Units: 1, BalanceAfter: &money.Money{Cents: 95, Currency: "USD"}}
		if diff := cmp.Diff(wantCharge, got); diff != "" {
			t.Errorf("result _meta consumption (-want +got):\n%s", diff)
		}
		st.wantCredits(t, e.ID, 95, 0)
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
		charged := st.consumptionByKey(t, "agent-1", f.consumes[0].IdempotencyKey)
		wantCharge := mcpgate.Consumption{ConsumptionID: charged.ID, Result: "consumed", EntitlementID: e.ID,
			Cost: usd5, Units: 1, BalanceAfter: &money.Money{Cents: 90, Currency: "USD"}}
		if diff := cmp.Diff(wantCharge, got); diff != "" {
			t.Errorf("result _meta consumption (-want +got):\n%s", diff)
		}
		st.wantCredits(t, e.ID, 90, 0)
	})
	if got := ran.Load(); got != 3 {
		t.Errorf("tools ran %d times, want 3", got)
	}
}

var cmpIgnoreKey = cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".IdempotencyKey" }, cmp.Ignore())

func TestGate_IdempotencyKey(t *testing.T) {
	_, f, _ := funded(t)
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
	forecastTerms := &mcpgate.Terms{Cost: &money.Money{Cents: 5, Currency: "USD"}, Units: 1, Policy: mcpgate.PolicyOnSuccess}
	k1 := mcp.Meta{mcpgate.MetaIdempotencyKey: "k1"}
	tests := []struct {
		name string
		cfg  mcpgate.Config
		// setup makes the real condition the refusal answers and returns the
		// gate's Biller, and the refusal's reasons and texts it alone knows.
		setup    func(t *testing.T) (f *recorder, reasons []entitlement.Denial, texts []string)
		tool     string
		meta     mcp.Meta
		want     mcpgate.Refusal
		wantText []string
	}{
		{
			name: "PaymentRequired", tool: "forecast",
			setup: func(t *testing.T) (*recorder, []entitlement.Denial, []string) {
				s := startStipend(t)
				e := s.grantCredits(t, "agent-1", 1) // less than the 5 cents the call may cost
				return s.recorder(t, s.hostKey), []entitlement.Denial{{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance}},
					[]string{"insufficient_balance (entitlement " + e.ID + ")"}
			},
			cfg: mcpgate.Config{PurchaseURL: "https://example.com/buy"},
			want: mcpgate.Refusal{Error: mcpgate.RefusalPaymentRequired, Service: "weather", Tool: "forecast",
				Price: forecastTerms, PurchaseURL: "https://example.com/buy"},
			wantText: []string{"payment required", "at most 5 cents USD or 1 unit, charged only if the tool succeeds",
				"Buy credits at https://example.com/buy"},
		},
		{
			name: "UnavailableFailsClosed", tool: "forecast",
			setup:    func(t *testing.T) (*recorder, []entitlement.Denial, []string) { return unreachable(t), nil, nil },
			want:     mcpgate.Refusal{Error: mcpgate.RefusalUnavailable, Service: "weather", Tool: "forecast", Retryable: true},
			wantText: []string{"try the call again"},
		},
		{
			// The key the gate derives for the call was used before by a
			// consume of another tool: Stipend answers a conflict.
			name: "Conflict", tool: "forecast", meta: k1,
			setup: func(t *testing.T) (*recorder, []entitlement.Denial, []string) {
				s, f, _ := funded(t)
				key := derivedKey(t, "forecast", k1)
				if _, err := s.host.Consume(t.Context(), client.ConsumeRequest{AgentID: "agent-1", Service: "weather", Tool: "alert",
					IdempotencyKey: key, Cost: &money.Money{Cents: 1, Currency: "USD"}}); err != nil {
					t.Fatalf("consume with the gate's key: %v", err)
				}
				return f, nil, nil
			},
			want:     mcpgate.Refusal{Error: mcpgate.RefusalKeyConflict, Service: "weather", Tool: "forecast"},
			wantText: []string{"idempotency key"},
		},
		{
			// The gate holds a reader key, which may not charge: Stipend
			// answers 403.
			name: "Misconfigured", tool: "forecast",
			setup: func(t *testing.T) (*recorder, []entitlement.Denial, []string) {
				s := startStipend(t)
				s.grantCredits(t, "agent-1", 100)
				return s.recorder(t, s.readerKey), nil, nil
			},
			want:     mcpgate.Refusal{Error: mcpgate.RefusalBillingError, Service: "weather", Tool: "forecast"},
			wantText: []string{"billing configuration error"},
		},
		{
			name: "Unpriced", tool: "unpriced",
			setup: func(t *testing.T) (*recorder, []entitlement.Denial, []string) {
				_, f, _ := funded(t)
				return f, nil, nil
			},
			want:     mcpgate.Refusal{Error: mcpgate.RefusalUnpriced, Service: "weather", Tool: "unpriced"},
			wantText: []string{"no price"},
		},
		{
			name: "NoAgent", tool: "forecast", meta: mcp.Meta{mcpgate.MetaAgentID: ""},
			setup: func(t *testing.T) (*recorder, []entitlement.Denial, []string) {
				_, f, _ := funded(t)
				return f, nil, nil
			},
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
				f, reasons, texts := tt.setup(t)
				cfg, want, meta := tt.cfg, tt.want, maps.Clone(tt.meta)
				cfg.Stipend, want.Reasons = f, reasons
				wantText := append(slices.Clip(tt.wantText), texts...)
				var ran atomic.Int32
				cs := connect(t, toolServer(newGate(t, cfg), &ran, typed))
				if _, err := cs.ListTools(t.Context(), nil); err != nil {
					t.Fatalf("ListTools: %v", err)
				}
				res := callTool(t, cs, tt.tool, nil, meta)
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
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("_meta refusal (-want +got):\n%s", diff)
				}
				if typed && res.StructuredContent != nil {
					t.Errorf("structuredContent = %v, want none: the tool declares an output schema", res.StructuredContent)
				}
				if !typed {
					var structured mcpgate.Refusal
					decode(t, res.StructuredContent, &structured)
					structured.Message = ""
					if diff := cmp.Diff(want, structured); diff != "" {
						t.Errorf("structuredContent of a tool without an output schema (-want +_meta refusal):\n%s", diff)
					}
				}
				if len(res.Content) != 1 {
					t.Fatalf("refusal has %d contents, want one text", len(res.Content))
				}
				text := res.Content[0].(*mcp.TextContent).Text
				for _, s := range append(wantText, message) {
					if !strings.Contains(text, s) {
						t.Errorf("refusal text %q does not mention %q", text, s)
					}
				}
				if got := ran.Load(); got != 0 {
					t.Errorf("tool ran %d times, want 0", got)
				}
				if tt.name == "Unpriced" || tt.name == "NoAgent" {
					if calls := f.calls(); len(calls) != 0 {
						t.Errorf("Stipend calls %v, want none: the gate refuses on its own", calls)
					}
				}
			})
		}
	}
}

// TestGate_RefusalWithoutSession covers the middleware called directly (no
// session to list the tools through): the refusal stays out of
// structuredContent, since the tool may declare an output schema.
func TestGate_RefusalWithoutSession(t *testing.T) {
	g := newGate(t, mcpgate.Config{Stipend: unreachable(t)})
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
	g := newGate(t, mcpgate.Config{Stipend: unreachable(t)})
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
	f := unreachable(t)
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
	f := unreachable(t)
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
