package mcpgate

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
)

// chargeBefore charges the call through a consume and only then runs the
// tool (PolicyBefore). The charge stands whatever the tool then does; a
// replayed consume (the key was charged already) runs the tool again,
// uncharged, since the client never got the first answer.
func (c *gatedCall) chargeBefore(ctx context.Context) (mcp.Result, error) {
	g := c.g
	req := client.ConsumeRequest{
		AgentID: c.agent, Service: g.service, Tool: c.tool,
		IdempotencyKey: g.idempotencyKey(c.call), Cost: c.price.Cost, Units: c.price.Units,
	}
	cctx, cancel := context.WithTimeout(ctx, g.timeout)
	res, err := g.stipend.Consume(cctx, req)
	cancel()
	if err != nil {
		return c.refused(ctx, err)
	}
	out, err := c.run(ctx)
	if err != nil {
		if res.Result == client.ResultConsumed {
			g.log.WarnContext(ctx, "mcpgate: tool failed after it was charged",
				"tool", c.tool, "consumption", res.Consumption.ID, "err", err)
		}
		return out, err
	}
	setMeta(out, MetaConsumption, consumptionOf(res.Result, &res.Consumption))
	return out, nil
}
