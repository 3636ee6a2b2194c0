package mcpgate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

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
// (price lookup, agent, key derivation, the charge against an in-process
// stand-in, the result's _meta) against calling the tool handler directly.
func BenchmarkMiddleware(b *testing.B) {
	g, err := mcpgate.New(mcpgate.Config{Stipend: instant{}, Service: "weather", Prices: prices})
	if err != nil {
		b.Fatal(err)
	}
	tool := func(context.Context, string, mcp.Request) (mcp.Result, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	}
	req := &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{
		Name: "forecast", Arguments: json.RawMessage(`{"city":"Oslo"}`),
		Meta: mcp.Meta{mcpgate.MetaAgentID: "agent-1", mcpgate.MetaRequestID: "nonce/n:7"},
	}}
	for name, h := range map[string]mcp.MethodHandler{"Direct": tool, "Gated": g.Middleware(tool)} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := h(b.Context(), "tools/call", req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
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
