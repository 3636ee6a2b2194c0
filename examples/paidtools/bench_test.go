package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// instantStipend answers every call at once, in process: the gate's own
// cost without Stipend's.
type instantStipend struct{}

func (instantStipend) Consume(_ context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", Cost: *r.Cost, Units: 1, BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

func (instantStipend) Authorize(_ context.Context, r client.AuthorizeRequest) (*client.HoldResult, error) {
	return &client.HoldResult{Result: client.ResultHeld, Hold: entitlement.Hold{ID: "h1", EntitlementID: "e1",
		EntitlementType: entitlement.TypeCredits, Status: entitlement.HoldOpen, MaxCost: *r.MaxCost, MaxUnits: 1}}, nil
}

func (instantStipend) CaptureHold(_ context.Context, id string, _ client.CaptureRequest) (*client.CaptureResult, error) {
	return &client.CaptureResult{Result: client.ResultCaptured, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", HoldID: id, Cost: money.Money{Cents: 5, Currency: "USD"}, Units: 1,
		BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

func (instantStipend) ReleaseHold(_ context.Context, id, _ string) (*client.HoldResult, error) {
	return &client.HoldResult{Result: client.ResultReleased, Hold: entitlement.Hold{ID: id, Status: entitlement.HoldReleased}}, nil
}

func (instantStipend) GetHold(_ context.Context, id string) (*entitlement.Hold, error) {
	return &entitlement.Hold{ID: id, Status: entitlement.HoldOpen}, nil
}

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
	instant, err := mcpgate.New(mcpgate.Config{Stipend: instantStipend{}, Service: "weather", Prices: prices, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	ts, keys := startStipend(b)
	billing, err := client.New(ts.URL, keys.billing)
	if err != nil {
		b.Fatal(err)
	}
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

	type setup struct {
		name string
		cs   *mcp.ClientSession
		call *mcp.CallToolParams
		lat  []time.Duration
	}
	meta := mcp.Meta{mcpgate.MetaAgentID: agent}
	forecast := &mcp.CallToolParams{Name: "forecast", Arguments: map[string]any{"city": "Oslo"}, Meta: meta}
	setups := []*setup{
		{name: "nogate", cs: connectServer(b, newServer(nil)), call: forecast},
		{name: "free", cs: connectServer(b, newServer(instant)), call: &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "hi"}, Meta: meta}},
		{name: "instant", cs: connectServer(b, newServer(instant)), call: forecast},
		{name: "stipend", cs: connectServer(b, newServer(real)), call: forecast},
	}
	i := 0
	for b.Loop() {
		for j := range setups {
			s := setups[(i+j)%len(setups)]
			start := time.Now()
			res, err := s.cs.CallTool(b.Context(), s.call)
			s.lat = append(s.lat, time.Since(start))
			if err != nil || res.IsError {
				b.Fatalf("%s: CallTool(%s): %v %v", s.name, s.call.Name, err, res)
			}
		}
		i++
	}
	median := map[string]time.Duration{}
	for _, s := range setups {
		slices.Sort(s.lat)
		median[s.name] = s.lat[len(s.lat)/2]
		b.ReportMetric(us(median[s.name]), s.name+"-p50-us")
		b.ReportMetric(us(s.lat[len(s.lat)*9/10]), s.name+"-p90-us")
	}
	for _, name := range []string{"free", "instant", "stipend"} {
		b.ReportMetric(us(median[name]-median["nogate"]), fmt.Sprintf("%s-overhead-p50-us", name))
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
