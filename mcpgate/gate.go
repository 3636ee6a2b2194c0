// Package mcpgate charges MCP tool calls to Stipend for the work they do.
//
// A Gate is receiving middleware for servers built on the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp). On every tools/call it looks
// the tool up in a price table and charges the calling agent through
// Stipend, by the tool's Policy:
//
//   - PolicyOnSuccess (the default): before the tool runs the gate
//     authorizes a hold of the price (POST /v1/authorize); when the tool
//     returns a result that is not isError it captures the hold (the price,
//     or less if the tool reported its real cost with Charge); when the tool
//     fails (isError, a Go error, a panic) or the request is cancelled it
//     releases the hold, and nothing is charged. A hold nobody ends (the
//     server died) expires after Config.HoldTTL, uncharged.
//   - PolicyBefore: the gate charges the price through POST /v1/consume
//     before the tool runs, and the charge stands whatever the tool then
//     does; for tools whose effect cannot be undone.
//
// Wiring:
//
//	gate, err := mcpgate.New(mcpgate.Config{
//		Stipend: stipendClient, // a *client.Client with a host key
//		Service: "weather",
//		Prices: map[string]mcpgate.Price{
//			"ping":     mcpgate.Free(),
//			"forecast": mcpgate.Credits(5, "USD"),
//			"alert":    mcpgate.Credits(20, "USD").ChargedBefore(),
//		},
//	})
//	server.AddReceivingMiddleware(gate.Middleware)
//
// A call no entitlement covers gets a tool result with isError set: a text
// saying why, the price and where to buy, for the model to read and act on,
// and a Refusal for programs under the _meta key "io.stipend/refusal" (and as
// structured content when the tool declares no output schema, which a refusal
// could never match). It is not a protocol error. A charged call's result
// carries a Consumption under the _meta key "io.stipend/consumption". The
// gate also shows each tool's Terms (price and charging policy) in its
// tools/list entry, under the _meta key "io.stipend/price".
//
// Each charge carries an idempotency key, so a retried call is charged once.
// The key comes from the request's _meta "io.stipend/idempotency-key" when
// the client sends one; otherwise it is derived from the session and the
// JSON-RPC request id, which the SDK does not expose to middleware: wrap the
// server's transport with Transport (stdio, in-memory) or its HTTP handler
// with Handler (streamable HTTP) so the gate can see it. Without either, every
// call without a client key gets a fresh random key and a transport-level
// retry is charged again. Either way the key also covers the tool name and
// its arguments, so reusing a key for a different call is charged anew.
package mcpgate

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
)

// The _meta keys the gate reads and writes.
const (
	// MetaIdempotencyKey (request) is the client's idempotency key for the call.
	MetaIdempotencyKey = "io.stipend/idempotency-key"
	// MetaAgentID (request or initialize) names the agent to charge, when
	// the server lets the client say so (see DefaultAgentID).
	MetaAgentID = "io.stipend/agent-id"
	// MetaRequestID (request) is stamped by Transport and Handler: a
	// connection nonce and the JSON-RPC request id.
	MetaRequestID = "io.stipend/request-id"
	// MetaConsumption (result) holds the Consumption of a charged call.
	MetaConsumption = "io.stipend/consumption"
	// MetaUnbilled (result) is true when a call ran and the gate could not
	// charge it: Stipend was unreachable before the call and FailOpen is
	// set, or (PolicyOnSuccess) the capture after the tool succeeded failed.
	MetaUnbilled = "io.stipend/unbilled"
	// MetaRefusal (result) holds the Refusal of a call the gate refused.
	MetaRefusal = "io.stipend/refusal"
	// MetaPrice (tools/list entry) holds the Terms of a tool in the price table.
	MetaPrice = "io.stipend/price"
)

// DefaultTimeout bounds one call to Stipend, retries included.
const DefaultTimeout = 5 * time.Second

// Biller is what the gate charges through; *client.Client (with a host key)
// is one. Its methods are the Stipend REST calls of the same names, and
// their errors are classified with the client package's Is functions.
type Biller interface {
	// Consume charges a call before it runs (PolicyBefore).
	Consume(ctx context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error)
	// Authorize reserves the most a call may cost (PolicyOnSuccess).
	Authorize(ctx context.Context, r client.AuthorizeRequest) (*client.HoldResult, error)
	// CaptureHold charges a held call what it cost.
	CaptureHold(ctx context.Context, id string, r client.CaptureRequest) (*client.CaptureResult, error)
	// ReleaseHold gives a hold back whole.
	ReleaseHold(ctx context.Context, id, agentID string) (*client.HoldResult, error)
	// GetHold reads a hold, to learn how another attempt of the same call
	// ended it.
	GetHold(ctx context.Context, id string) (*entitlement.Hold, error)
}

// Config configures a Gate.
type Config struct {
	// Stipend charges the calls (required); use a client with a host key.
	Stipend Biller
	// Service is the Stipend service name of this server (required).
	Service string
	// Prices maps tool names to prices. A tool missing from the table is
	// refused, so a forgotten price never gives a tool away.
	Prices map[string]Price
	// AgentID returns the agent to charge for a call; nil means DefaultAgentID.
	AgentID func(ctx context.Context, req *mcp.CallToolRequest) (string, error)
	// FailOpen lets calls run uncharged when Stipend cannot be reached. By
	// default the gate fails closed: the call is refused with a retryable
	// Refusal.
	FailOpen bool
	// Timeout bounds each call to Stipend (a consume, an authorize, a
	// capture, a release), the client's retries included; 0 means
	// DefaultTimeout.
	Timeout time.Duration
	// HoldTTL is how long the hold of a call charged on success lasts: a
	// hold that is neither captured nor released (the server died while
	// the tool ran) expires after it, and the agent is not charged. Set it
	// above the longest a tool may run (with Timeout for the capture): a
	// tool still running when its hold expires cannot be charged, and its
	// result is withheld. A longer TTL keeps what a dead server's holds
	// reserve out of the agent's reach for longer. It is part of each
	// hold's request, so changing it makes a retry of an earlier call under
	// the same key a conflict. A whole number of seconds, at most
	// entitlement.MaxHoldTTL; 0 means entitlement.DefaultHoldTTL.
	HoldTTL time.Duration
	// PurchaseURL, if set, is where an agent's owner can buy credits; it is
	// shown in payment-required refusals.
	PurchaseURL string
	// Logger receives what the gate cannot tell the caller (Stipend
	// failures, fail-open calls); nil means slog.Default().
	Logger *slog.Logger
}

// Gate charges tool calls to Stipend; its Middleware goes on an mcp.Server.
type Gate struct {
	stipend     Biller
	service     string
	prices      map[string]Price
	agentID     func(context.Context, *mcp.CallToolRequest) (string, error)
	failOpen    bool
	timeout     time.Duration
	holdTTL     time.Duration
	purchaseURL string
	log         *slog.Logger
	wallet      *wallet // AddWallet's (wallet.go); nil without one
}

// New validates c and returns its Gate.
func New(c Config) (*Gate, error) {
	if c.Stipend == nil {
		return nil, errors.New("mcpgate: Config.Stipend is required")
	}
	probe := entitlement.ConsumeRequest{AgentID: "a", Service: c.Service, Tool: "t", IdempotencyKey: "k"}
	if err := probe.Normalize(); err != nil {
		return nil, fmt.Errorf("mcpgate: Config.Service: %w", err)
	}
	g := &Gate{
		stipend: c.Stipend, service: c.Service, prices: make(map[string]Price, len(c.Prices)),
		agentID: c.AgentID, failOpen: c.FailOpen, timeout: c.Timeout, holdTTL: c.HoldTTL, purchaseURL: c.PurchaseURL, log: c.Logger,
	}
	if g.holdTTL == 0 {
		g.holdTTL = entitlement.DefaultHoldTTL
	}
	if g.holdTTL%time.Second != 0 || g.holdTTL < time.Second || g.holdTTL > entitlement.MaxHoldTTL {
		return nil, fmt.Errorf("mcpgate: Config.HoldTTL %v: want whole seconds from 1s to %v", c.HoldTTL, entitlement.MaxHoldTTL)
	}
	for tool, p := range c.Prices {
		if p.Free {
			g.prices[tool] = p
			continue
		}
		policy, err := p.policy()
		if err != nil {
			return nil, fmt.Errorf("mcpgate: price of tool %q: %w", tool, err)
		}
		p.Policy = policy
		probe := entitlement.ConsumeRequest{AgentID: "a", Service: c.Service, Tool: tool, IdempotencyKey: "k", Cost: p.Cost, Units: p.Units}
		if err := probe.Normalize(); err != nil {
			return nil, fmt.Errorf("mcpgate: price of tool %q: %w", tool, err)
		}
		g.prices[tool] = p
	}
	if g.agentID == nil {
		g.agentID = DefaultAgentID
	}
	if g.timeout <= 0 {
		g.timeout = DefaultTimeout
	}
	if g.log == nil {
		g.log = slog.Default()
	}
	return g, nil
}

// ErrNoAgent is returned by DefaultAgentID when a call names no agent.
var ErrNoAgent = errors.New("mcpgate: the call names no agent")

// DefaultAgentID names the agent to charge: the authenticated user of the
// request's bearer token when the server verifies tokens (and then only that),
// else the request's _meta "io.stipend/agent-id", else that key in the _meta
// of the session's initialize request. Trusting _meta means trusting the
// client to say who pays; servers that face untrusted clients should verify
// tokens or pass their own AgentID.
func DefaultAgentID(_ context.Context, req *mcp.CallToolRequest) (string, error) {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		if id := req.Extra.TokenInfo.UserID; id != "" {
			return id, nil
		}
		return "", ErrNoAgent
	}
	if id, ok := req.Params.Meta[MetaAgentID].(string); ok && id != "" {
		return id, nil
	}
	if req.Session != nil {
		if ip := req.Session.InitializeParams(); ip != nil {
			if id, ok := ip.Meta[MetaAgentID].(string); ok && id != "" {
				return id, nil
			}
		}
	}
	return "", ErrNoAgent
}
