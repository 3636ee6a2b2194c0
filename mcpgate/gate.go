// Package mcpgate charges MCP tool calls to Stipend before they run.
//
// A Gate is receiving middleware for servers built on the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk/mcp). On every tools/call it looks
// the tool up in a price table, charges the calling agent through
// POST /v1/consume and only then lets the tool run:
//
//	gate, err := mcpgate.New(mcpgate.Config{
//		Stipend: stipendClient, // a *client.Client with a host key
//		Service: "weather",
//		Prices: map[string]mcpgate.Price{
//			"ping":     mcpgate.Free(),
//			"forecast": mcpgate.Credits(5, "USD"),
//		},
//	})
//	server.AddReceivingMiddleware(gate.Middleware)
//
// A call no entitlement covers gets a tool result with isError set: a text
// saying why, the price and where to buy, for the model to read and act on,
// and a Refusal for programs under the _meta key "io.stipend/refusal" (and as
// structured content when the tool declares no output schema, which a refusal
// could never match). It is not a protocol error. A charged call's result
// carries a Charge under the _meta key "io.stipend/consumption". The gate
// also shows each tool's Terms (price and charging policy) in its tools/list
// entry, under the _meta key "io.stipend/price".
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
	// MetaConsumption (result) holds the Charge of a charged call.
	MetaConsumption = "io.stipend/consumption"
	// MetaUnbilled (result) is true when the gate let a call run without
	// charging it because Stipend was unreachable and FailOpen is set.
	MetaUnbilled = "io.stipend/unbilled"
	// MetaRefusal (result) holds the Refusal of a call the gate refused.
	MetaRefusal = "io.stipend/refusal"
	// MetaPrice (tools/list entry) holds the Terms of a tool in the price table.
	MetaPrice = "io.stipend/price"
)

// DefaultTimeout bounds one charge, retries included.
const DefaultTimeout = 5 * time.Second

// Consumer charges a tool call; *client.Client is one.
type Consumer interface {
	Consume(ctx context.Context, r client.ConsumeRequest) (*client.ConsumeResult, error)
}

// Config configures a Gate.
type Config struct {
	// Stipend charges the calls (required); use a client with a host key.
	Stipend Consumer
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
	// Timeout bounds one charge, the client's retries included; 0 means DefaultTimeout.
	Timeout time.Duration
	// PurchaseURL, if set, is where an agent's owner can buy credits; it is
	// shown in payment-required refusals.
	PurchaseURL string
	// Logger receives what the gate cannot tell the caller (Stipend
	// failures, fail-open calls); nil means slog.Default().
	Logger *slog.Logger
}

// Gate charges tool calls to Stipend; its Middleware goes on an mcp.Server.
type Gate struct {
	stipend     Consumer
	service     string
	prices      map[string]Price
	agentID     func(context.Context, *mcp.CallToolRequest) (string, error)
	failOpen    bool
	timeout     time.Duration
	purchaseURL string
	log         *slog.Logger
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
		agentID: c.AgentID, failOpen: c.FailOpen, timeout: c.Timeout, purchaseURL: c.PurchaseURL, log: c.Logger,
	}
	for tool, p := range c.Prices {
		if p.Free {
			g.prices[tool] = p
			continue
		}
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
