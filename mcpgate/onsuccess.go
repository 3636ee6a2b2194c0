package mcpgate

import (
	"context"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
)

// chargeOnSuccess charges the call for the work it did (PolicyOnSuccess):
// it authorizes a hold of the price, runs the tool, and captures the hold
// (what the tool reported with Charge, else the price) when the tool
// succeeded, or releases it when the tool failed, panicked or the request
// was cancelled.
//
// The attempt whose authorize made the hold owns it. An authorize that
// replays (the key was used for this same call before) finds the hold as it
// is now:
//   - captured: the call was charged; the tool runs again (the client never
//     got the first answer) and nothing more is charged;
//   - released or expired: the earlier attempt failed and was not charged;
//     the call is refused (RefusalKeySpent) rather than run free;
//   - open: another attempt holds it (still running, or its server died);
//     the tool runs and, if it succeeds, captures the hold. A failing replay
//     never releases a hold it does not own, so cancelling one of two
//     copies of a call cannot make the other free.
//
// A result is only handed over charged, or marked unbilled when Stipend
// could not be reached to capture it: a run whose hold was ended without a
// charge by the time it finished is refused instead.
func (c *gatedCall) chargeOnSuccess(ctx context.Context) (mcp.Result, error) {
	g := c.g
	req := client.AuthorizeRequest{
		AgentID: c.agent, Service: g.service, Tool: c.tool, IdempotencyKey: g.idempotencyKey(c.call),
		MaxCost: c.price.Cost, MaxUnits: c.price.Units, TTLSeconds: int64(g.holdTTL / time.Second),
	}
	actx, cancel := context.WithTimeout(ctx, g.timeout)
	auth, err := g.stipend.Authorize(actx, req)
	cancel()
	if err != nil {
		return c.refused(ctx, err)
	}
	h := &auth.Hold
	owner := auth.Result == client.ResultHeld
	m := &meter{tool: c.tool, price: c.price, log: g.log}
	if !owner {
		switch h.Status {
		case entitlement.HoldCaptured:
			res, err := c.runMetered(ctx, m, nil)
			if err == nil {
				setMeta(res, MetaConsumption, replayOf(h))
			}
			return res, err
		case entitlement.HoldReleased, entitlement.HoldExpired:
			return c.refuse(ctx, c.spent(h))
		}
	}
	if ctx.Err() != nil { // cancelled while authorizing: do not start the work
		if owner {
			c.release(ctx, h)
		}
		return nil, ctx.Err()
	}
	release := func() {}
	if owner {
		release = func() { c.release(ctx, h) }
	}
	res, err := c.runMetered(ctx, m, release)
	if !succeeded(ctx, res, err) {
		release()
		return res, err
	}
	return c.capture(ctx, h, m.amount(), res)
}

// runMetered runs the tool with m in its context, for Charge. If the tool
// panics (or calls runtime.Goexit), onPanic (if not nil) runs before the
// panic goes on: the gate does not recover, as the SDK does not (an
// ungated server dies of it too), but the hold is released first.
func (c *gatedCall) runMetered(ctx context.Context, m *meter, onPanic func()) (res mcp.Result, err error) {
	returned := false
	defer func() {
		if !returned && onPanic != nil {
			onPanic()
		}
	}()
	res, err = c.run(context.WithValue(ctx, meterKey{}, m))
	returned = true
	return res, err
}

// succeeded reports whether the tool did its work: a result that is not
// isError, of a request not cancelled. A result asking for input (the
// multi-round-trip flow) has not finished; the request that finishes it is
// charged.
func succeeded(ctx context.Context, res mcp.Result, err error) bool {
	r, ok := res.(*mcp.CallToolResult)
	return err == nil && ctx.Err() == nil && ok && r != nil && !r.IsError && !r.NeedsInput()
}

// capture charges the hold h what the tool reported (a; nil fields: the
// price) and answers res with the charge in its _meta.
func (c *gatedCall) capture(ctx context.Context, h *entitlement.Hold, a Amount, res mcp.Result) (mcp.Result, error) {
	g := c.g
	cctx, cancel := c.settleContext(ctx)
	out, err := g.stipend.CaptureHold(cctx, h.ID, client.CaptureRequest{AgentID: c.agent, Cost: a.Cost, Units: a.Units})
	cancel()
	switch {
	case err == nil:
		result := client.ResultConsumed
		if out.Result != client.ResultCaptured {
			result = client.ResultReplay // another attempt captured it with the same amount
		}
		setMeta(res, MetaConsumption, consumptionOf(result, &out.Consumption))
		return res, nil
	case client.IsHoldExpired(err):
		g.log.ErrorContext(ctx, "mcpgate: the tool ran past its hold's expiry, so the call cannot be charged; "+
			"its result is withheld (raise Config.HoldTTL above the tool's longest run)",
			"tool", c.tool, "agent", c.agent, "hold", h.ID, "expiresAt", h.ExpiresAt, "holdTTL", g.holdTTL)
		return c.refuse(ctx, c.refusal(RefusalHoldExpired, "the tool ran longer than its charge could be held, "+
			"so the call was not charged and its result was withheld"))
	case client.IsHoldConflict(err):
		return c.endedElsewhere(ctx, h, res)
	}
	g.log.ErrorContext(ctx, "mcpgate: capturing the hold failed; it expires uncharged, so the agent is not charged for this call",
		"tool", c.tool, "agent", c.agent, "hold", h.ID, "expiresAt", h.ExpiresAt, "err", err)
	setMeta(res, MetaUnbilled, true)
	return res, nil
}

// endedElsewhere answers a run whose capture found the hold already ended by
// another attempt of the call: charged (captured with another amount) or
// not (released), as GetHold says.
func (c *gatedCall) endedElsewhere(ctx context.Context, h *entitlement.Hold, res mcp.Result) (mcp.Result, error) {
	g := c.g
	gctx, cancel := c.settleContext(ctx)
	now, err := g.stipend.GetHold(gctx, h.ID)
	cancel()
	switch {
	case err != nil:
		g.log.ErrorContext(ctx, "mcpgate: another attempt ended the hold, and reading it failed; answering the result unbilled",
			"tool", c.tool, "agent", c.agent, "hold", h.ID, "err", err)
		setMeta(res, MetaUnbilled, true)
		return res, nil
	case now.Status == entitlement.HoldCaptured:
		setMeta(res, MetaConsumption, replayOf(now))
		return res, nil
	}
	return c.refuse(ctx, c.spent(now))
}

// release gives the hold h back whole. A release that fails leaves the hold
// to expire, which charges nothing either.
func (c *gatedCall) release(ctx context.Context, h *entitlement.Hold) {
	g := c.g
	rctx, cancel := c.settleContext(ctx)
	_, err := g.stipend.ReleaseHold(rctx, h.ID, c.agent)
	cancel()
	switch {
	case err == nil:
	case client.IsHoldConflict(err):
		g.log.InfoContext(ctx, "mcpgate: the call failed, and another attempt of it had already been charged",
			"tool", c.tool, "agent", c.agent, "hold", h.ID)
	default:
		g.log.ErrorContext(ctx, "mcpgate: releasing the hold of a failed call failed; it expires uncharged",
			"tool", c.tool, "agent", c.agent, "hold", h.ID, "expiresAt", h.ExpiresAt, "err", err)
	}
}

// settleContext bounds a capture, release or hold read by the gate's
// timeout. It outlives the request: a cancelled call still releases its
// hold.
func (c *gatedCall) settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), c.g.timeout)
}

// spent is the refusal of a call whose key's hold h ended without a charge.
func (c *gatedCall) spent(h *entitlement.Hold) *Refusal {
	why := "it was released: the tool failed or the call was cancelled"
	if h.Status == entitlement.HoldExpired {
		why = "it expired before the call finished"
	}
	r := c.refusal(RefusalKeySpent, "an earlier attempt of this call under the same idempotency key was not charged ("+why+
		"), so it is not run again under that key; send the call again with a new idempotency key")
	return r
}

// replayOf is the Consumption of the captured hold h, charged earlier.
func replayOf(h *entitlement.Hold) *Consumption {
	c := &Consumption{ConsumptionID: h.ConsumptionID, Result: client.ResultReplay, HoldID: h.ID, EntitlementID: h.EntitlementID}
	if h.Captured != nil {
		c.Units = h.Captured.Units
		if h.EntitlementType == entitlement.TypeCredits {
			cost := h.Captured.Cost
			c.Cost = &cost
		}
	}
	return c
}
