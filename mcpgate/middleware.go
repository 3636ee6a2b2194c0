package mcpgate

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
)

const methodCallTool = "tools/call"

// Middleware charges every tools/call by its tool's policy (see the package
// comment) and shows the price of each tool in tools/list results; every
// other method passes straight through. Add it with
// server.AddReceivingMiddleware(gate.Middleware).
func (g *Gate) Middleware(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method == methodListTools {
			res, err := next(ctx, method, req)
			if list, ok := res.(*mcp.ListToolsResult); ok && err == nil {
				g.showPrices(list)
			}
			return res, err
		}
		call, ok := req.(*mcp.CallToolRequest)
		if method != methodCallTool || !ok || call.Params == nil {
			return next(ctx, method, req)
		}
		c := &gatedCall{g: g, next: next, call: call}
		if refusal := c.admit(ctx); refusal != nil {
			return c.refuse(ctx, refusal)
		}
		switch {
		case c.price.Free:
			return next(ctx, method, req)
		case c.price.Policy == PolicyBefore:
			return c.chargeBefore(ctx)
		}
		return c.chargeOnSuccess(ctx)
	}
}

// gatedCall is one tools/call passing the gate.
type gatedCall struct {
	g     *Gate
	next  mcp.MethodHandler
	call  *mcp.CallToolRequest
	tool  string
	price Price
	agent string
}

// admit looks up the price and, for a priced tool, the agent. It returns
// the refusal of a call that cannot be charged at all.
func (c *gatedCall) admit(ctx context.Context) *Refusal {
	g := c.g
	c.tool = c.call.Params.Name
	price, ok := g.prices[c.tool]
	if !ok {
		return &Refusal{Error: RefusalUnpriced, Service: g.service, Tool: c.tool,
			Message: "tool " + c.tool + " has no price configured, so it is not available"}
	}
	c.price = price
	if price.Free {
		return nil
	}
	agent, err := g.agentID(ctx, c.call)
	if err != nil || agent == "" {
		return c.refusal(RefusalNoAgent, "tool "+c.tool+" is paid, and the call does not say which agent pays for it")
	}
	c.agent = agent
	return nil
}

// run passes the call on to the tool, with ctx.
func (c *gatedCall) run(ctx context.Context) (mcp.Result, error) {
	return c.next(ctx, methodCallTool, c.call)
}

// refusal is a refusal of kind with message, showing the tool's price.
func (c *gatedCall) refusal(kind, message string) *Refusal {
	return &Refusal{Error: kind, Service: c.g.service, Tool: c.tool, Price: termsOf(c.price), Message: message}
}

// refuse answers r instead of a result of the tool.
func (c *gatedCall) refuse(ctx context.Context, r *Refusal) (mcp.Result, error) {
	res := r.result(!declaresOutputSchema(ctx, c.next, c.call))
	c.g.linkWallet(res, r) // wallet.go
	return res, nil
}

// refused answers a call whose consume or authorize failed with err: its
// refusal, or the tool run uncharged when the gate fails open.
func (c *gatedCall) refused(ctx context.Context, err error) (mcp.Result, error) {
	if refusal := c.deny(ctx, err); refusal != nil {
		return c.refuse(ctx, refusal)
	}
	return c.runUnbilled(ctx)
}

// deny explains an error of Stipend's answer to the first request of a
// call (a consume or an authorize): the refusal to answer, or nil with
// FailOpen when Stipend could not be reached and the call is to run
// uncharged.
func (c *gatedCall) deny(ctx context.Context, err error) *Refusal {
	g := c.g
	var p *client.Problem
	errors.As(err, &p)
	switch {
	case client.IsPaymentRequired(err):
		r := c.refusal(RefusalPaymentRequired, "payment required: no entitlement of this agent covers tool "+c.tool)
		r.PurchaseURL = g.purchaseURL
		if p != nil {
			r.Reasons = p.Reasons
		}
		return r
	case client.IsKeyReused(err):
		return &Refusal{Error: RefusalKeyConflict, Service: g.service, Tool: c.tool,
			Message: "the idempotency key of this call was already used for a different call; send a new key"}
	case ctx.Err() != nil:
		// The caller gave up; it will not read a refusal, and it must not run the tool.
		return &Refusal{Error: RefusalUnavailable, Service: g.service, Tool: c.tool, Retryable: true,
			Message: "the call was cancelled before its charge was confirmed"}
	case client.IsUnavailable(err):
		if g.failOpen {
			g.log.WarnContext(ctx, "mcpgate: Stipend unavailable; running the call uncharged (fail open)",
				"tool", c.tool, "agent", c.agent, "err", err)
			return nil
		}
		g.log.ErrorContext(ctx, "mcpgate: Stipend unavailable; refusing the call (fail closed)", "tool", c.tool, "err", err)
		return &Refusal{Error: RefusalUnavailable, Service: g.service, Tool: c.tool, Retryable: true,
			Message: "billing is temporarily unavailable; try the call again shortly"}
	}
	// A 400, 401 or 403: the gate or its key is misconfigured. Say little to
	// the caller and everything to the operator.
	g.log.ErrorContext(ctx, "mcpgate: Stipend refused the charge", "tool", c.tool, "agent", c.agent, "err", err)
	return &Refusal{Error: RefusalBillingError, Service: g.service, Tool: c.tool,
		Message: "the call could not be charged because of a billing configuration error"}
}

// runUnbilled runs the call uncharged (fail open) and marks its result so.
func (c *gatedCall) runUnbilled(ctx context.Context) (mcp.Result, error) {
	res, err := c.run(ctx)
	if err == nil {
		setMeta(res, MetaUnbilled, true)
	}
	return res, err
}

// setMeta sets _meta[key] on res, if res is a tool result.
func setMeta(res mcp.Result, key string, v any) {
	r, ok := res.(*mcp.CallToolResult)
	if !ok || r == nil {
		return
	}
	if r.Meta == nil {
		r.Meta = mcp.Meta{}
	}
	r.Meta[key] = v
}

// termsOf returns the Terms of p for a refusal.
func termsOf(p Price) *Terms {
	t := p.Terms()
	return &t
}
