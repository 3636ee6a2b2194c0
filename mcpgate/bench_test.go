package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/internal/gatebench"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

// BenchmarkMiddleware measures the gate's own work on one priced call
// (price lookup, agent, key derivation, the Stipend calls against an
// in-process stand-in, the result's _meta) against calling the tool handler
// directly: Before is one consume, OnSuccess an authorize and a capture.
func BenchmarkMiddleware(b *testing.B) {
	g, err := mcpgate.New(mcpgate.Config{Stipend: gatebench.Instant{}, Service: "weather", Prices: prices})
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
	call := func(tool string) *mcp.CallToolParams {
		return &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"city": "Oslo"}, Meta: mcp.Meta{mcpgate.MetaAgentID: "agent-1"}}
	}
	gatebench.Rotate(b, "ungated", []*gatebench.Setup{
		{Name: "ungated", Session: connect(b, toolServer(nil, &ran, false)), Call: call("forecast")},
		{Name: "before", Session: connect(b, toolServer(g, &ran, false)), Call: call("alert")},
		{Name: "on_success", Session: connect(b, toolServer(g, &ran, false)), Call: call("forecast")},
	})
}

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
