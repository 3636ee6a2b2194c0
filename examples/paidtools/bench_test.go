package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/gatebench"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// BenchmarkGateOverhead measures one tools/call of the example's forecast
// tool through the SDK client on in-memory transports, in four setups:
//
//   - nogate: the same server without the gate;
//   - free: the gated server, calling the free echo tool (no charge);
//   - instant: the gate charging an in-process stand-in (the gate's own cost);
//   - stipend: the gate charging the real REST service (memory store) over
//     loopback HTTP, every call with its own key, so every call is a charge
//     (forecast is charged on success: an authorize and a capture).
//
// Each iteration calls every setup once, in rotating order, so that load
// from other processes on a shared machine falls on all of them alike. It
// reports each setup's median and p90 latency and the medians' differences
// from nogate. One op is one call of each setup.
func BenchmarkGateOverhead(b *testing.B) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	instant, err := mcpgate.New(mcpgate.Config{Stipend: gatebench.Instant{}, Service: "weather", Prices: prices, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ts, keys := startStipend(b)
	billing := keys.billingClient(b, ts.URL)
	p, _, err := billing.CreatePayment(b.Context(), "bench", client.PaymentRequest{
		AgentID: agent, Amount: money.Money{Cents: money.MaxCents, Currency: "USD"}, Provider: payment.ProviderManual,
		Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "weather"}},
	})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := billing.SucceedPayment(b.Context(), p.ID); err != nil {
		b.Fatal(err)
	}
	real, err := newGate(config{stipendURL: ts.URL, hostKey: keys.host, service: "weather"}, quiet)
	if err != nil {
		b.Fatal(err)
	}

	meta := mcp.Meta{mcpgate.MetaAgentID: agent}
	forecast := &mcp.CallToolParams{Name: "forecast", Arguments: map[string]any{"city": "Oslo"}, Meta: meta}
	gatebench.Rotate(b, "nogate", []*gatebench.Setup{
		{Name: "nogate", Session: connectServer(b, newServer(nil)), Call: forecast},
		{Name: "free", Session: connectServer(b, newServer(instant)), Call: &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}, Meta: meta}},
		{Name: "instant", Session: connectServer(b, newServer(instant)), Call: forecast},
		{Name: "stipend", Session: connectServer(b, newServer(real)), Call: forecast},
	})
}
