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

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/syncbuf"
	"github.com/stipend-mcp/stipend/mcpgate"
)

// The tests in this file charge through a real Stipend (the REST service on
// the memory store, on loopback) and check the agent's entitlements after
// each call.

// lifecyclePrices prices the tools of lifecycleServer, all charged on success.
var lifecyclePrices = map[string]mcpgate.Price{
	"ok":         mcpgate.Credits(10, "USD"),
	"tool_error": mcpgate.Credits(10, "USD"),
	"go_error":   mcpgate.Credits(10, "USD"),
	"metered":    mcpgate.CreditsOrUnits(50, "USD", 5),
}

// meteredIn is what the metered tool reports with mcpgate.Charge; a nil
// field is not reported.
type meteredIn struct {
	Cents *int64  `json:"cents,omitempty"`
	Units *int64  `json:"units,omitempty"`
	Cur   *string `json:"currency,omitempty"`
}

// lifecycleServer is a gated MCP server whose tools succeed (ok), return an
// isError result (tool_error), return a Go error, which the SDK answers as
// a JSON-RPC error (go_error), or report their cost (metered). ran counts
// the runs.
func lifecycleServer(g *mcpgate.Gate, ran *atomic.Int32) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "lifecycle", Version: "1"}, nil)
	schema := json.RawMessage(`{"type":"object"}`)
	text := func(s string) *mcp.CallToolResult {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
	}
	s.AddTool(&mcp.Tool{Name: "ok", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		return text("done"), nil
	})
	s.AddTool(&mcp.Tool{Name: "tool_error", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		res := text("the upstream service failed")
		res.IsError = true
		return res, nil
	})
	s.AddTool(&mcp.Tool{Name: "go_error", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		return nil, errors.New("the tool broke")
	})
	s.AddTool(&mcp.Tool{Name: "metered", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ran.Add(1)
		var in meteredIn
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		var a mcpgate.Amount
		switch {
		case in.Cents != nil:
			a = mcpgate.Cents(*in.Cents, "USD")
			if in.Cur != nil {
				a.Cost.Currency = *in.Cur
			}
			a.Units = in.Units
		case in.Units != nil:
			a = mcpgate.UnitsUsed(*in.Units) // units alone
		}
		if in.Cents != nil || in.Units != nil {
			if err := mcpgate.Charge(ctx, a); err != nil {
				res := text(err.Error())
				res.IsError = true
				return res, nil
			}
		}
		return text("metered"), nil
	})
	s.AddReceivingMiddleware(g.Middleware)
	return s
}

func lifecycleGate(t *testing.T, biller mcpgate.Biller, log *syncbuf.Buffer) *mcpgate.Gate {
	t.Helper()
	c := mcpgate.Config{Stipend: biller, Service: "weather", Prices: lifecyclePrices}
	if log != nil {
		c.Logger = textLogger(log)
	}
	return newGate(t, c)
}

// callAs calls tool as agent with the client idempotency key key (none if empty).
func callAs(t *testing.T, cs *mcp.ClientSession, agent, tool, key string, args any) (*mcp.CallToolResult, error) {
	t.Helper()
	meta := mcp.Meta{mcpgate.MetaAgentID: agent}
	if key != "" {
		meta[mcpgate.MetaIdempotencyKey] = key
	}
	return cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args, Meta: meta})
}

// consumptionIn returns the consumption in a result's _meta, or fails.
func consumptionIn(t *testing.T, res *mcp.CallToolResult) mcpgate.Consumption {
	t.Helper()
	if res.IsError {
		t.Fatalf("result is an error: %v %v", res.Content, res.Meta)
	}
	var c mcpgate.Consumption
	decode(t, res.Meta[mcpgate.MetaConsumption], &c)
	if c.ConsumptionID == "" {
		t.Fatalf("result _meta %v has no %s", res.Meta, mcpgate.MetaConsumption)
	}
	return c
}

// refusalIn returns the refusal of a refused call, or fails.
func refusalIn(t *testing.T, res *mcp.CallToolResult) mcpgate.Refusal {
	t.Helper()
	if !res.IsError {
		t.Fatalf("result is not an error, want a refusal: %v", res.Content)
	}
	var r mcpgate.Refusal
	decode(t, res.Meta[mcpgate.MetaRefusal], &r)
	return r
}

// directCall is a tools/call request for the middleware called directly,
// without a session.
func directCall(agent, tool, key string) *mcp.CallToolRequest {
	return &mcp.CallToolRequest{Params: &mcp.CallToolParamsRaw{Name: tool, Arguments: json.RawMessage(`{}`),
		Meta: mcp.Meta{mcpgate.MetaAgentID: agent, mcpgate.MetaIdempotencyKey: key}}}
}

func TestOnSuccess_FailingToolIsNotCharged(t *testing.T) {
	s := startStipend(t)
	g := lifecycleGate(t, s.host, nil)
	var ran atomic.Int32
	cs := connect(t, lifecycleServer(g, &ran))

	t.Run("IsError", func(t *testing.T) {
		e := s.grantCredits(t, "agent-iserror", 100)
		res, err := callAs(t, cs, "agent-iserror", "tool_error", "", nil)
		if err != nil || !res.IsError {
			t.Fatalf("tool_error = %v, %v; want an isError result", res, err)
		}
		if c, ok := res.Meta[mcpgate.MetaConsumption]; ok {
			t.Errorf("a failed call's result carries a consumption %v", c)
		}
		s.wantCredits(t, e.ID, 100, 0)
	})
	t.Run("GoError", func(t *testing.T) {
		e := s.grantCredits(t, "agent-goerror", 100)
		if _, err := callAs(t, cs, "agent-goerror", "go_error", "", nil); err == nil || !strings.Contains(err.Error(), "the tool broke") {
			t.Fatalf("go_error answered %v, want the tool's error", err)
		}
		s.wantCredits(t, e.ID, 100, 0)
	})
	// A panic in a tool kills an SDK server (the SDK does not recover), so
	// the middleware is called directly: it releases, and the panic goes on.
	t.Run("Panic", func(t *testing.T) {
		e := s.grantCredits(t, "agent-panic", 100)
		h := g.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) { panic("the tool panicked") })
		func() {
			defer func() {
				if got := recover(); got != "the tool panicked" {
					t.Errorf("recovered %v, want the tool's own panic", got)
				}
			}()
			h(t.Context(), "tools/call", directCall("agent-panic", "ok", "panic-1"))
		}()
		s.wantCredits(t, e.ID, 100, 0)
	})
	t.Run("Cancelled", func(t *testing.T) {
		e := s.grantCredits(t, "agent-cancel", 100)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		// The tool ignores the cancellation and returns a result the client
		// no longer waits for.
		h := g.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
			cancel()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "too late"}}}, nil
		})
		res, err := h(ctx, "tools/call", directCall("agent-cancel", "ok", "cancel-1"))
		if err != nil {
			t.Fatalf("middleware: %v", err)
		}
		if r := res.(*mcp.CallToolResult); r.Meta[mcpgate.MetaConsumption] != nil {
			t.Errorf("a cancelled call's result carries a consumption %v", r.Meta)
		}
		s.wantCredits(t, e.ID, 100, 0)
	})
	if got := ran.Load(); got != 2 {
		t.Errorf("the SDK server's tools ran %d times, want 2", got)
	}
}

func TestOnSuccess_VariableCost(t *testing.T) {
	s := startStipend(t)
	var log syncbuf.Buffer
	var ran atomic.Int32
	cs := connect(t, lifecycleServer(lifecycleGate(t, s.host, &log), &ran))
	i64 := func(n int64) *int64 { return &n }

	credits := s.grantCredits(t, "agent-credits", 200)
	tests := []struct {
		name     string
		in       meteredIn
		want     int64 // cents charged
		wantWarn bool
	}{
		{name: "Reported", in: meteredIn{Cents: i64(7)}, want: 7},
		{name: "ReportedZero", in: meteredIn{Cents: i64(0)}, want: 0},
		{name: "NotReported", in: meteredIn{}, want: 50},
		{name: "MoreThanThePrice", in: meteredIn{Cents: i64(80)}, want: 50, wantWarn: true},
	}
	balance := int64(200)
	for _, tt := range tests {
		t.Run("Credits/"+tt.name, func(t *testing.T) {
			res, err := callAs(t, cs, "agent-credits", "metered", "", tt.in)
			if err != nil {
				t.Fatalf("metered: %v", err)
			}
			c := consumptionIn(t, res)
			balance -= tt.want
			if c.Result != client.ResultConsumed || c.Cost == nil || c.Cost.Cents != tt.want || c.BalanceAfter.Cents != balance {
				t.Errorf("consumption = %s %v leaving %v, want consumed %d cents leaving %d", c.Result, c.Cost, c.BalanceAfter, tt.want, balance)
			}
			s.wantCredits(t, credits.ID, balance, 0)
			if warned := strings.Contains(log.String(), "more than its price"); warned != tt.wantWarn {
				t.Errorf("WARN about a report above the price logged: %v, want %v; log:\n%s", warned, tt.wantWarn, log.String())
			}
		})
	}
	t.Run("Credits/WrongCurrency", func(t *testing.T) {
		eur := "EUR"
		res, err := callAs(t, cs, "agent-credits", "metered", "", meteredIn{Cents: i64(7), Cur: &eur})
		if err != nil || !res.IsError || !strings.Contains(res.Content[0].(*mcp.TextContent).Text, "priced in USD") {
			t.Fatalf("metered reporting EUR = %v, %v; want the tool's isError result naming the currency", res, err)
		}
		s.wantCredits(t, credits.ID, balance, 0)
	})

	quota := s.grantQuota(t, "agent-quota", 20)
	for _, tt := range []struct {
		name          string
		in            meteredIn
		wantRemaining int64
	}{
		{"Reported", meteredIn{Cents: i64(7), Units: i64(2)}, 18},
		{"CostOnly", meteredIn{Cents: i64(7)}, 13}, // units not reported: the price's 5
		{"MoreThanThePrice", meteredIn{Units: i64(9)}, 8},
	} {
		t.Run("Quota/"+tt.name, func(t *testing.T) {
			res, err := callAs(t, cs, "agent-quota", "metered", "", tt.in)
			if err != nil {
				t.Fatalf("metered: %v", err)
			}
			c := consumptionIn(t, res)
			if c.RemainingAfter == nil || *c.RemainingAfter != tt.wantRemaining || c.Cost != nil {
				t.Errorf("consumption = cost %v, remaining %v; want no cost and %d remaining", c.Cost, c.RemainingAfter, tt.wantRemaining)
			}
			if e := s.entitlement(t, quota.ID); e.Quota.Remaining != tt.wantRemaining || e.Quota.Held != 0 {
				t.Errorf("quota: %d remaining, %d held; want %d and 0", e.Quota.Remaining, e.Quota.Held, tt.wantRemaining)
			}
		})
	}
}

func TestOnSuccess_Replay(t *testing.T) {
	s := startStipend(t)
	var ran atomic.Int32
	cs := connect(t, lifecycleServer(lifecycleGate(t, s.host, nil), &ran))

	t.Run("Captured", func(t *testing.T) {
		e := s.grantCredits(t, "agent-replay", 100)
		seven := int64(7)
		first, err := callAs(t, cs, "agent-replay", "metered", "replay-1", meteredIn{Cents: &seven})
		if err != nil {
			t.Fatal(err)
		}
		c1 := consumptionIn(t, first)
		before := ran.Load()
		again, err := callAs(t, cs, "agent-replay", "metered", "replay-1", meteredIn{Cents: &seven})
		if err != nil {
			t.Fatal(err)
		}
		c2 := consumptionIn(t, again)
		if c2.Result != client.ResultReplay || c2.ConsumptionID != c1.ConsumptionID || c2.HoldID != c1.HoldID || c2.Cost.Cents != 7 {
			t.Errorf("retry = %+v, want a replay of %s (hold %s) at 7 cents", c2, c1.ConsumptionID, c1.HoldID)
		}
		if got := ran.Load() - before; got != 1 {
			t.Errorf("the retry ran the tool %d times, want 1 (the client never got the first answer)", got)
		}
		s.wantCredits(t, e.ID, 93, 0)
	})
	t.Run("Released", func(t *testing.T) {
		e := s.grantCredits(t, "agent-released", 100)
		if res, err := callAs(t, cs, "agent-released", "tool_error", "released-1", nil); err != nil || !res.IsError {
			t.Fatalf("tool_error = %v, %v; want an isError result", res, err)
		}
		before := ran.Load()
		res, err := callAs(t, cs, "agent-released", "tool_error", "released-1", nil)
		if err != nil {
			t.Fatal(err)
		}
		if r := refusalIn(t, res); r.Error != mcpgate.RefusalKeySpent || !strings.Contains(r.Message, "new idempotency key") {
			t.Errorf("retry of a failed call under its key = %+v, want %s asking for a new key", r, mcpgate.RefusalKeySpent)
		}
		if got := ran.Load() - before; got != 0 {
			t.Errorf("the refused retry ran the tool %d times, want 0", got)
		}
		s.wantCredits(t, e.ID, 100, 0)
	})
}

// dyingBiller is a gate's Stipend whose server dies after the authorize:
// its captures and releases never reach Stipend. holds records the hold ids
// it authorized.
type dyingBiller struct {
	*client.Client
	mu    sync.Mutex
	holds []string
}

var errDied = &client.NetworkError{Op: "POST /v1/holds", Err: errors.New("the server died")}

func (d *dyingBiller) Authorize(ctx context.Context, r client.AuthorizeRequest) (*client.HoldResult, error) {
	res, err := d.Client.Authorize(ctx, r)
	if err == nil {
		d.mu.Lock()
		d.holds = append(d.holds, res.Hold.ID)
		d.mu.Unlock()
	}
	return res, err
}

func (*dyingBiller) CaptureHold(context.Context, string, client.CaptureRequest) (*client.CaptureResult, error) {
	return nil, errDied
}

func (*dyingBiller) ReleaseHold(context.Context, string, string) (*client.HoldResult, error) {
	return nil, errDied
}

func TestOnSuccess_ServerDiesBeforeCapture(t *testing.T) {
	s := startStipend(t)
	var log syncbuf.Buffer
	dying := &dyingBiller{Client: s.host}
	var ran atomic.Int32
	dead := connect(t, lifecycleServer(lifecycleGate(t, dying, &log), &ran))
	healthy := connect(t, lifecycleServer(lifecycleGate(t, s.host, nil), &ran))

	call := func(t *testing.T, cs *mcp.ClientSession, agent, key string) *mcp.CallToolResult {
		t.Helper()
		res, err := callAs(t, cs, agent, "ok", key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	lastHold := func() string {
		dying.mu.Lock()
		defer dying.mu.Unlock()
		return dying.holds[len(dying.holds)-1]
	}

	t.Run("TheHoldExpires", func(t *testing.T) {
		e := s.grantCredits(t, "agent-dies", 100)
		res := call(t, dead, "agent-dies", "dies-1")
		if res.Meta[mcpgate.MetaUnbilled] != true || res.Meta[mcpgate.MetaConsumption] != nil {
			t.Errorf("result _meta %v, want unbilled and no consumption", res.Meta)
		}
		hold := lastHold()
		if !strings.Contains(log.String(), "level=ERROR") || !strings.Contains(log.String(), hold) {
			t.Errorf("log does not have an ERROR naming hold %s:\n%s", hold, log.String())
		}
		s.wantCredits(t, e.ID, 100, 10) // reserved, not charged
		h, err := s.host.GetHold(t.Context(), hold)
		if err != nil || h.Status != entitlement.HoldOpen {
			t.Fatalf("GetHold(%s) = %v, %v; want it open", hold, h, err)
		}

		s.clock.Advance(entitlement.DefaultHoldTTL)
		if h, err = s.host.GetHold(t.Context(), hold); err != nil || h.Status != entitlement.HoldExpired {
			t.Errorf("GetHold(%s) after its TTL = %v, %v; want it expired", hold, h, err)
		}
		if n, err := s.store.ExpireHolds(t.Context(), 100); err != nil || n != 1 {
			t.Errorf("ExpireHolds = %d, %v; want 1 hold ended", n, err)
		}
		s.wantCredits(t, e.ID, 100, 0)

		// The agent's retry under the same key is refused: the call was
		// never charged, and is not run free.
		if r := refusalIn(t, call(t, healthy, "agent-dies", "dies-1")); r.Error != mcpgate.RefusalKeySpent {
			t.Errorf("retry after the hold expired: refusal %s, want %s", r.Error, mcpgate.RefusalKeySpent)
		}
		s.wantCredits(t, e.ID, 100, 0)
	})
	t.Run("ARetryCapturesTheOpenHold", func(t *testing.T) {
		e := s.grantCredits(t, "agent-retries", 100)
		call(t, dead, "agent-retries", "retries-1")
		hold := lastHold()
		c := consumptionIn(t, call(t, healthy, "agent-retries", "retries-1"))
		if c.Result != client.ResultConsumed || c.HoldID != hold {
			t.Errorf("retry on another server = %s from hold %s, want consumed from %s", c.Result, c.HoldID, hold)
		}
		s.wantCredits(t, e.ID, 90, 0)
	})
}

func TestOnSuccess_ToolOutlivesItsHold(t *testing.T) {
	s := startStipend(t)
	var log syncbuf.Buffer
	g := newGate(t, mcpgate.Config{Stipend: s.host, Service: "weather", Prices: lifecyclePrices, Logger: textLogger(&log), HoldTTL: 10 * time.Second})
	e := s.grantCredits(t, "agent-slow", 100)
	h := g.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
		s.clock.Advance(11 * time.Second)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "finally"}}}, nil
	})
	res, err := h(t.Context(), "tools/call", directCall("agent-slow", "ok", "slow-1"))
	if err != nil {
		t.Fatal(err)
	}
	r := res.(*mcp.CallToolResult)
	if got := refusalIn(t, r); got.Error != mcpgate.RefusalHoldExpired {
		t.Errorf("refusal %s, want %s", got.Error, mcpgate.RefusalHoldExpired)
	}
	if strings.Contains(r.Content[0].(*mcp.TextContent).Text, "finally") {
		t.Errorf("the uncharged result was handed over: %v", r.Content)
	}
	if !strings.Contains(log.String(), "HoldTTL") {
		t.Errorf("log does not tell the operator to raise HoldTTL:\n%s", log.String())
	}
	s.wantCredits(t, e.ID, 100, 0)
}

// TestOnSuccess_DuplicateAttempts runs two copies of one call (one key) at
// once. The first owns the hold; the copy that replays never releases it,
// so cancelling a copy cannot make the other free.
func TestOnSuccess_DuplicateAttempts(t *testing.T) {
	s := startStipend(t)
	g := lifecycleGate(t, s.host, nil)
	result := func() mcp.Result { return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done"}}} }

	for _, tt := range []struct {
		name string
		// ownerFails and copyFails cancel that attempt's request while its tool runs.
		ownerFails, copyFails bool
		wantBalance           int64
	}{
		{name: "CopyCancelledOwnerSucceeds", copyFails: true, wantBalance: 90},
		{name: "CopySucceedsOwnerFails", ownerFails: true, wantBalance: 90},
	} {
		t.Run(tt.name, func(t *testing.T) {
			agent := "agent-" + tt.name
			e := s.grantCredits(t, agent, 100)
			started, finish := make(chan struct{}), make(chan struct{})
			ownerCtx, cancelOwner := context.WithCancel(t.Context())
			defer cancelOwner()
			owner := g.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
				close(started)
				<-finish
				if tt.ownerFails {
					cancelOwner()
				}
				return result(), nil
			})
			done := make(chan mcp.Result)
			go func() {
				res, _ := owner(ownerCtx, "tools/call", directCall(agent, "ok", "dup-1"))
				done <- res
			}()
			<-started

			copyCtx, cancelCopy := context.WithCancel(t.Context())
			defer cancelCopy()
			cp := g.Middleware(func(context.Context, string, mcp.Request) (mcp.Result, error) {
				if tt.copyFails {
					cancelCopy()
				}
				return result(), nil
			})
			copyRes, err := cp(copyCtx, "tools/call", directCall(agent, "ok", "dup-1"))
			if err != nil {
				t.Fatal(err)
			}
			close(finish)
			ownerRes := <-done
			s.wantCredits(t, e.ID, tt.wantBalance, 0)
			winner := ownerRes
			if tt.ownerFails {
				winner = copyRes
			}
			if c := consumptionIn(t, winner.(*mcp.CallToolResult)); c.Result != client.ResultConsumed {
				t.Errorf("the succeeding attempt's consumption = %+v, want consumed", c)
			}
		})
	}
}
