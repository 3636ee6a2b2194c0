// Package gatebench holds what the benchmarks of mcpgate and of the example
// server share: a Biller that answers every call at once, in process, and a
// latency table of tool calls made in rotating order.
package gatebench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

// Instant is an mcpgate.Biller that answers every call at once, in process:
// with it a benchmark measures the gate's own cost without Stipend's.
type Instant struct{}

var _ mcpgate.Biller = Instant{}

// Consume answers a consume of the request's cost.
func (Instant) Consume(_ context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", Cost: *r.Cost, Units: 1, BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

// Authorize answers an open hold of the request's maximum cost.
func (Instant) Authorize(_ context.Context, r client.AuthorizeRequest) (*client.HoldResult, error) {
	return &client.HoldResult{Result: client.ResultHeld, Hold: entitlement.Hold{ID: "h1", EntitlementID: "e1",
		EntitlementType: entitlement.TypeCredits, Status: entitlement.HoldOpen, MaxCost: *r.MaxCost, MaxUnits: 1}}, nil
}

// CaptureHold answers a capture of 5 cents.
func (Instant) CaptureHold(_ context.Context, id string, _ client.CaptureRequest) (*client.CaptureResult, error) {
	return &client.CaptureResult{Result: client.ResultCaptured, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", HoldID: id, Cost: money.Money{Cents: 5, Currency: "USD"}, Units: 1,
		BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

// ReleaseHold answers a released hold.
func (Instant) ReleaseHold(_ context.Context, id, _ string) (*client.HoldResult, error) {
	return &client.HoldResult{Result: client.ResultReleased, Hold: entitlement.Hold{ID: id, Status: entitlement.HoldReleased}}, nil
}

// GetHold answers an open hold.
func (Instant) GetHold(_ context.Context, id string) (*entitlement.Hold, error) {
	return &entitlement.Hold{ID: id, Status: entitlement.HoldOpen}, nil
}

// Setup is one way of making a tool call that Rotate times.
type Setup struct {
	Name    string
	Session *mcp.ClientSession
	Call    *mcp.CallToolParams
	lat     []time.Duration
}

// Rotate calls every setup once per iteration of b.Loop, in rotating order,
// so that load from other processes on a shared machine falls on all of them
// alike. It reports each setup's median and p90 latency (NAME-p50-us,
// NAME-p90-us) and the difference of every other setup's median from base's
// (NAME-overhead-p50-us). A failed or refused call fails b.
func Rotate(b *testing.B, base string, setups []*Setup) {
	b.Helper()
	i := 0
	for b.Loop() {
		for j := range setups {
			s := setups[(i+j)%len(setups)]
			start := time.Now()
			res, err := s.Session.CallTool(b.Context(), s.Call)
			s.lat = append(s.lat, time.Since(start))
			if err != nil || res.IsError {
				b.Fatalf("%s: CallTool(%s): %v %v", s.Name, s.Call.Name, err, res)
			}
		}
		i++
	}
	median := map[string]time.Duration{}
	for _, s := range setups {
		slices.Sort(s.lat)
		median[s.Name] = s.lat[len(s.lat)/2]
		b.ReportMetric(us(median[s.Name]), s.Name+"-p50-us")
		b.ReportMetric(us(s.lat[len(s.lat)*9/10]), s.Name+"-p90-us")
	}
	for _, s := range setups {
		if s.Name != base {
			b.ReportMetric(us(median[s.Name]-median[base]), s.Name+"-overhead-p50-us")
		}
	}
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
