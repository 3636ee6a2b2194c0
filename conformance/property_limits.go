package conformance

import (
	"fmt"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// limitRound is the spend-control round of the property test: one agent
// with a credits entitlement and a quota, each with a most per call and a
// spend limit per day far below what it holds, and maxCallers concurrent
// callers consuming and holding random amounts (some above the most per
// call) on both, capturing or releasing their holds. The clock stands
// still, so all of it falls in one period. Afterwards: nothing was charged
// or held above the most per call, the period's charges add up to at most
// the limit and to what the entitlement shows spent, and the balance lost
// exactly what was charged.
type limitRound struct {
	*property
	s store.EntitlementStore
}

// limitCall is one caller's call and what it charged.
type limitCall struct {
	service string
	amount  int64 // cents or units asked for (the hold's maximum for a hold)
	hold    bool
	outcome store.Outcome
	reason  entitlement.Reason
	charged int64
	draw    int64 // decides what a hold does: release it, or capture how much
	err     error
}

func (r *limitRound) run(clock *Clock, maxCallers int) {
	t := r.t
	rng := r.rng
	agent := newAgent()
	now := clock.Now()
	perCall, limit := 20+rng.Int64N(80), 500+rng.Int64N(1500)
	c := credits(agent, 1_000_000, now)
	c.Scope.Service = "paid"
	c = createEntitlement(t, r.s, withControls(t, c, entitlement.Update{
		MaxPerCall: &entitlement.Set[*money.Money]{To: ptr(usd(perCall))}, SpendLimit: dailySpend(limit),
	}, now))
	unitsPerCall, unitLimit := 1+rng.Int64N(5), 20+rng.Int64N(60)
	q := quota(agent, 1_000_000, now)
	q.Scope.Service = "metered"
	q = createEntitlement(t, r.s, withControls(t, q, entitlement.Update{
		MaxUnitsPerCall: &entitlement.Set[*int64]{To: ptr(unitsPerCall)},
		SpendLimit:      &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodDay, MaxUnits: unitLimit}},
	}, now))

	calls := make([][]limitCall, maxCallers)
	for i := range calls {
		calls[i] = make([]limitCall, callsPerCaller)
		for j := range calls[i] {
			lc := &calls[i][j]
			lc.hold, lc.draw = rng.IntN(3) == 0, rng.Int64N(1<<62)
			if rng.IntN(2) == 0 {
				lc.service, lc.amount = "paid", 1+rng.Int64N(perCall+perCall/4)
			} else {
				lc.service, lc.amount = "metered", 1+rng.Int64N(unitsPerCall+1)
			}
		}
	}
	together(maxCallers, func(i int) {
		for j := range calls[i] {
			r.call(agent, fmt.Sprintf("c%d-%d", i, j), &calls[i][j])
		}
	})
	r.check(c, perCall, limit, calls, "paid")
	r.check(q, unitsPerCall, unitLimit, calls, "metered")
}

// call makes lc with key.
func (r *limitRound) call(agent, key string, lc *limitCall) {
	draw := lc.draw
	ctx := r.t.Context()
	req := entitlement.ConsumeRequest{AgentID: agent, Service: lc.service, Tool: testTool, IdempotencyKey: key}
	if lc.service == "paid" {
		req.Cost = ptr(usd(lc.amount))
	} else {
		req.Units = lc.amount
	}
	if !lc.hold {
		res, err := r.s.CheckAndConsume(ctx, req)
		lc.outcome, lc.err = res.Outcome, err
		if res.Outcome == store.Consumed {
			lc.charged = lc.amount
		}
		lc.reason = ownReason(res.Denials)
		return
	}
	res, err := r.s.Authorize(ctx, entitlement.HoldRequest{ConsumeRequest: req})
	lc.outcome, lc.err = res.Outcome, err
	if err != nil || res.Outcome != store.Held {
		lc.reason = ownReason(res.Denials)
		return
	}
	if draw%3 == 0 {
		if _, lc.err = r.s.ReleaseHold(ctx, res.Hold.ID, agent); lc.err == nil {
			lc.outcome = store.Released
		}
		return
	}
	n := draw % (lc.amount + 1)
	a := entitlement.Amount{Units: &n}
	if lc.service == "paid" {
		a = entitlement.Amount{Cost: ptr(usd(n))}
	}
	cres, err := r.s.CaptureHold(ctx, res.Hold.ID, agent, a)
	lc.outcome, lc.err = cres.Outcome, err
	if err == nil {
		lc.charged = n
	}
}

// check verifies the invariants on entitlement e, whose calls went to service.
func (r *limitRound) check(e entitlement.Entitlement, perCall, limit int64, calls [][]limitCall, service string) {
	var charged int64
	for _, cs := range calls {
		for _, lc := range cs {
			if lc.service != service {
				continue
			}
			if lc.err != nil {
				r.errorf("%s call of %d: %v", service, lc.amount, lc.err)
				continue
			}
			switch {
			case lc.amount > perCall && lc.outcome != store.Denied:
				r.errorf("%s call of %d above the most per call %d was %s", service, lc.amount, perCall, lc.outcome)
			case lc.amount > perCall && lc.reason != entitlement.ReasonMaxPerCall:
				r.errorf("%s call of %d above the most per call %d was denied for %s, want %s", service, lc.amount, perCall, lc.reason, entitlement.ReasonMaxPerCall)
			case lc.outcome == store.Denied && lc.amount <= perCall && lc.reason != entitlement.ReasonSpendLimit:
				r.errorf("%s call of %d was denied for %s, want %s", service, lc.amount, lc.reason, entitlement.ReasonSpendLimit)
			}
			charged += lc.charged
		}
	}
	if charged > limit {
		r.errorf("%s: charged %d in one period, above the limit %d", service, charged, limit)
	}
	got := getEntitlement(r.t, r.s, e.ID)
	spent, left := got.Limits.Spend.SpentUnits, got.Quota.Remaining
	initial := e.Quota.Remaining
	if got.Type == entitlement.TypeCredits {
		spent, left, initial = got.Limits.Spend.Spent.Cents, got.Credits.Balance.Cents, e.Credits.Balance.Cents
	}
	if spent != charged || initial-left != charged {
		r.errorf("%s: spent %d and lost %d, want both %d (what the calls charged)", service, spent, initial-left, charged)
	}
	if got.Credits.Held.Cents != 0 || got.Quota.Held != 0 {
		r.errorf("%s: something is still held after every hold ended: %+v %+v", service, got.Credits.Held, got.Quota.Held)
	}
}

// ownReason is the reason of the denial by the entitlement of the call's
// service: the other one denies it for its scope.
func ownReason(ds []entitlement.Denial) entitlement.Reason {
	for _, d := range ds {
		if d.Reason != entitlement.ReasonScopeMismatch {
			return d.Reason
		}
	}
	return ""
}
