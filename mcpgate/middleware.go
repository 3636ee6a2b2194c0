package mcpgate

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
)

const methodCallTool = "tools/call"

// Middleware charges every tools/call before passing it on to next, and
// shows the price of each tool in tools/list results; every other method
// passes straight through. Add it with
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
		charge, refusal := g.charge(ctx, call)
		if refusal != nil {
			return refusal.result(!declaresOutputSchema(ctx, next, call)), nil
		}
		res, err := next(ctx, method, req)
		if err != nil || res == nil || charge == nil {
			if err != nil && charge != nil && charge.Result == client.ResultConsumed {
				g.log.WarnContext(ctx, "mcpgate: tool failed after it was charged",
					"tool", call.Params.Name, "consumption", charge.ConsumptionID, "err", err)
			}
			return res, err
		}
		meta := res.GetMeta()
		if meta == nil {
			meta = map[string]any{}
		}
		if charge.unbilled {
			meta[MetaUnbilled] = true
		} else {
			meta[MetaConsumption] = charge
		}
		res.SetMeta(meta)
		return res, nil
	}
}

// charge charges call. It returns the charge (nil for a free tool), or the
// refusal to answer instead of running the tool.
func (g *Gate) charge(ctx context.Context, call *mcp.CallToolRequest) (*Charge, *Refusal) {
	tool := call.Params.Name
	price, ok := g.prices[tool]
	if !ok {
		return nil, &Refusal{Error: RefusalUnpriced, Service: g.service, Tool: tool,
			Message: "tool " + tool + " has no price configured, so it is not available"}
	}
	if price.Free {
		return nil, nil
	}
	agent, err := g.agentID(ctx, call)
	if err != nil || agent == "" {
		return nil, &Refusal{Error: RefusalNoAgent, Service: g.service, Tool: tool, Price: termsOf(price),
			Message: "tool " + tool + " is paid, and the call does not say which agent pays for it"}
	}
	req := client.ConsumeRequest{
		AgentID: agent, Service: g.service, Tool: tool,
		IdempotencyKey: g.idempotencyKey(call), Cost: price.Cost, Units: price.Units,
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	res, err := g.stipend.Consume(cctx, req)
	if err == nil {
		return chargeOf(res), nil
	}
	var p *client.Problem
	errors.As(err, &p)
	switch {
	case client.IsPaymentRequired(err):
		r := &Refusal{Error: RefusalPaymentRequired, Service: g.service, Tool: tool, Price: termsOf(price),
			PurchaseURL: g.purchaseURL, Message: "payment required: no entitlement of this agent covers tool " + tool}
		if p != nil {
			r.Reasons = p.Reasons
		}
		return nil, r
	case client.IsConflict(err):
		return nil, &Refusal{Error: RefusalKeyConflict, Service: g.service, Tool: tool,
			Message: "the idempotency key of this call was already used for a different call; send a new key"}
	case ctx.Err() != nil:
		// The caller gave up; it will not read a refusal, and it must not run the tool.
		return nil, &Refusal{Error: RefusalUnavailable, Service: g.service, Tool: tool, Retryable: true,
			Message: "the call was cancelled before its charge was confirmed"}
	case client.IsUnavailable(err):
		if g.failOpen {
			g.log.WarnContext(ctx, "mcpgate: Stipend unavailable; running the call uncharged (fail open)",
				"tool", tool, "agent", agent, "err", err)
			return &Charge{unbilled: true}, nil
		}
		g.log.ErrorContext(ctx, "mcpgate: Stipend unavailable; refusing the call (fail closed)", "tool", tool, "err", err)
		return nil, &Refusal{Error: RefusalUnavailable, Service: g.service, Tool: tool, Retryable: true,
			Message: "billing is temporarily unavailable; try the call again shortly"}
	}
	// A 400, 401 or 403: the gate or its key is misconfigured. Say little to
	// the caller and everything to the operator.
	g.log.ErrorContext(ctx, "mcpgate: Stipend refused the charge", "tool", tool, "agent", agent, "err", err)
	return nil, &Refusal{Error: RefusalBillingError, Service: g.service, Tool: tool,
		Message: "the call could not be charged because of a billing configuration error"}
}

// termsOf returns the Terms of p for a refusal.
func termsOf(p Price) *Terms {
	t := p.Terms()
	return &t
}
