package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

// instant answers every call at once, in process.
type instant struct{}

func (instant) Consume(_ context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", Cost: *r.Cost, Units: 1, BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

func (instant) Authorize(_ context.Context, r client.AuthorizeRequest) (*client.HoldResult, error) {
	return &client.HoldResult{Result: client.ResultHeld, Hold: entitlement.Hold{ID: "h1", EntitlementID: "e1",
		EntitlementType: entitlement.TypeCredits, Status: entitlement.HoldOpen, MaxCost: *r.MaxCost, MaxUnits: 1}}, nil
}

func (instant) CaptureHold(_ context.Context, id string, _ client.CaptureRequest) (*client.CaptureResult, error) {
	return &client.CaptureResult{Result: client.ResultCaptured, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", HoldID: id, Cost: money.Money{Cents: 5, Currency: "USD"}, Units: 1,
		BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

func (instant) ReleaseHold(_ context.Context, id, _ string) (*client.HoldResult, error) {
	return &client.HoldResult{Result: client.ResultReleased, Hold: entitlement.Hold{ID: id, Status: entitlement.HoldReleased}}, nil
}

func (instant) GetHold(_ context.Context, id string) (*entitlement.Hold, error) {
	return &entitlement.Hold{ID: id, Status: entitlement.HoldOpen}, nil
}

// BenchmarkMiddleware measures the gate's own work on one priced call
// (price lookup, agent, key derivation, the Stipend calls against an
// in-process stand-in, the result's _meta) against calling the tool handler
// directly: Before is one consume, OnSuccess an authorize and a capture.
func BenchmarkMiddleware(b *testing.B) {
	g, err := mcpgate.New(mcpgate.Config{Stipend: instant{}, Service: "weather", Prices: prices})
	if err != nil {
		b.Fatal(err)
	}
	tool := func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	request := func(name string) *mcp.CallToolRequest {
		return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
			Name: name, Arguments: json.RawMessage(`{"city":"Oslo"}`),
			Meta: mcp.Meta{mcpgate.MetaAgentID: "agent-1", mcpgate.MetaRequestID: "nonce/n:7"},
		}}
	}
	for _, bm := range []struct {
		name string
		h    mcp.MethodHandler
		req  *mcp.CallToolRequest
	}{
		{"Direct", tool, request("forecast")},
		{"Before", g.Middleware(tool), request("alert")},
		{"OnSuccess", g.Middleware(tool), request("forecast")},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := bm.h(b.Context(), "tools/call", bm.req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGate measures one priced tools/call through the SDK client on
// in-memory transports, charged through a real Stipend (the REST service on
// the memory store, over loopback HTTP), in three setups:
//
//   - ungated: the same server without the gate;
//   - before: PolicyBefore, one consume per call;
//   - on_success: PolicyOnSuccess, an authorize and a capture per call.
//
// Every call has its own idempotency key (from its JSON-RPC request id), so
// every call is charged. Each iteration calls every setup once, in rotating
// order, so load from other processes falls on all of them alike. It reports
// each setup's median and p90 latency and the medians' differences from
// ungated. One op is one call of each setup.
func BenchmarkGate(b *testing.B) {
	s := startStipend(b)
	s.grantCredits(b, "agent-1", money.MaxCents)
	quiet := slog.New(slog.DiscardHandler)
	g, err := mcpgate.New(mcpgate.Config{Stipend: s.host, Service: "weather", Prices: prices, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	var ran atomic.Int32
	type setup struct {
		name string
		cs   *mcp.ClientSession
		tool string
		lat  []time.Duration
	}
	setups := []*setup{
		{name: "ungated", cs: connect(b, toolServer(nil, &ran, false)), tool: "forecast"},
		{name: "before", cs: connect(b, toolServer(g, &ran, false)), tool: "alert"},
		{name: "on_success", cs: connect(b, toolServer(g, &ran, false)), tool: "forecast"},
	}
	meta := mcp.Meta{mcpgate.MetaAgentID: "agent-1"}
	i := 0
	for b.Loop() {
		for j := range setups {
			st := setups[(i+j)%len(setups)]
			start := time.Now()
			res, err := st.cs.CallTool(b.Context(), &mcp.CallToolParams{Name: st.tool, Arguments: map[string]any{"city": "Oslo"}, Meta: meta})
			st.lat = append(st.lat, time.Since(start))
			if err != nil || res.IsError {
				b.Fatalf("%s: CallTool(%s): %v %v", st.name, st.tool, err, res)
			}
		}
		i++
	}
	median := map[string]time.Duration{}
	for _, st := range setups {
		slices.Sort(st.lat)
		median[st.name] = st.lat[len(st.lat)/2]
		b.ReportMetric(us(median[st.name]), st.name+"-p50-us")
		b.ReportMetric(us(st.lat[len(st.lat)*9/10]), st.name+"-p90-us")
	}
	for _, name := range []string{"before", "on_success"} {
		b.ReportMetric(us(median[name]-median["ungated"]), name+"-overhead-p50-us")
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkHandler measures what mcpgate.Handler adds to a posted tools/call:
// reading the body and stamping the request id into its _meta.
func BenchmarkHandler(b *testing.B) {
	body := []byte(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"forecast","arguments":{"city":"Oslo"},"_meta":{"io.stipend/agent-id":"agent-1"}}}`)
	sink := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.Copy(io.Discard, r.Body) })
	for name, h := range map[string]http.Handler{"Direct": sink, "Stamped": mcpgate.Handler(sink)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
				r.Header.Set("Mcp-Session-Id", "session-1")
				h.ServeHTTP(httptest.NewRecorder(), r)
			}
		})
	}
}
