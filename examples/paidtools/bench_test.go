package main

import (
	"context"
	"io"
	"log/slog"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// cpuTime is the CPU time the process has used, user and system. On a
// shared machine it is steadier than wall time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// instantStipend answers every consume at once, in process: the gate's own
// cost without Stipend's.
type instantStipend struct{}

func (instantStipend) Consume(_ context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error) {
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", Cost: *r.Cost, Units: 1, BalanceAfter: money.Money{Cents: 1, Currency: "USD"},
	}}, nil
}

// BenchmarkToolCall measures one tools/call of the example's forecast tool
// through the SDK client on in-memory transports: without the gate, with the
// gate and an in-process Stipend stand-in, and with the gate charging a real
// Stipend (REST service, memory store) over loopback HTTP. Each gated call
// has its own idempotency key (derived from its request id), so every call
// is a real charge.
func BenchmarkToolCall(b *testing.B) {
	args := map[string]any{"city": "Oslo"}
	meta := mcp.Meta{mcpgate.MetaAgentID: agent}
	run := func(b *testing.B, cs *mcp.ClientSession, tool string) {
		b.Helper()
		args := args
		if tool == "echo" {
			args = map[string]any{"text": "hi"}
		}
		start := cpuTime()
		for b.Loop() {
			res, err := cs.CallTool(b.Context(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
			if err != nil || res.IsError {
				b.Fatalf("CallTool(%s): %v %v", tool, err, res)
			}
		}
		b.ReportMetric(float64(cpuTime()-start)/float64(b.N), "cpu-ns/op")
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	b.Run("NoGate", func(b *testing.B) {
		run(b, connectServer(b, newServer(nil)), "forecast")
	})
	b.Run("GateFreeTool", func(b *testing.B) {
		g, err := mcpgate.New(mcpgate.Config{Stipend: instantStipend{}, Service: "weather", Prices: prices, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		run(b, connectServer(b, newServer(g)), "echo")
	})
	b.Run("GateInstantStipend", func(b *testing.B) {
		g, err := mcpgate.New(mcpgate.Config{Stipend: instantStipend{}, Service: "weather", Prices: prices, Logger: quiet})
		if err != nil {
			b.Fatal(err)
		}
		run(b, connectServer(b, newServer(g)), "forecast")
	})
	b.Run("GateRealStipend", func(b *testing.B) {
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
		g, err := newGate(config{stipendURL: ts.URL, hostKey: keys.host, service: "weather"}, quiet)
		if err != nil {
			b.Fatal(err)
		}
		run(b, connectServer(b, newServer(g)), "forecast")
	})
}
