package conformance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// property is one round of the property test: a random population of
// agents and entitlements, concurrent callers reusing a small pool of keys,
// and the invariants of CheckAndConsume checked afterwards.
type property struct {
	t     *testing.T
	seed  int64
	round int
	rng   *rand.Rand

	agents []string
	ents   []entitlement.Entitlement // as created (revocations applied)
	specs  map[callKey]entitlement.ConsumeRequest
	calls  [][]call // per caller
}

type callKey struct{ agent, key string }

type call struct {
	req entitlement.ConsumeRequest
	res store.ConsumeResult
	err error
}

// errorf reports a failure with what reproduces it.
func (p *property) errorf(format string, args ...any) {
	p.t.Helper()
	p.t.Errorf("seed %d round %d: %s", p.seed, p.round, fmt.Sprintf(format, args...))
}

func (p *property) run(s store.EntitlementStore, clock *Clock, maxCallers int) {
	p.t.Helper()
	p.populate(s, clock.Now())
	callers := minCallers + p.rng.IntN(maxCallers-minCallers+1)
	if p.round == 0 {
		callers = maxCallers // the first round always runs the most
	}
	p.plan(callers)
	together(callers, func(c int) {
		for i := range p.calls[c] {
			cl := &p.calls[c][i]
			cl.res, cl.err = s.CheckAndConsume(p.t.Context(), cl.req)
		}
	})
	consumed := p.checkResults()

	finals := p.checkStored(s, consumed)
	p.checkReplays(s, consumed, finals)
}

// populate creates 1–3 agents with 1–4 entitlements each, of every kind and
// state: rich and poor credits (some in EUR), quotas, subscriptions for the
// "free" tool only, expired and revoked ones.
func (p *property) populate(s store.EntitlementStore, now time.Time) {
	rng := p.rng
	for range 1 + rng.IntN(3) {
		agent := newAgent()
		p.agents = append(p.agents, agent)
		for range 1 + rng.IntN(4) {
			var e entitlement.Entitlement
			created := now.Add(-time.Duration(rng.IntN(3600)) * time.Second)
			switch k := rng.IntN(20); {
			case k < 12:
				e = credits(agent, rng.Int64N(1500), created)
				if rng.IntN(10) == 0 {
					e.Credits.Balance.Currency, e.Credits.Granted.Currency = "EUR", "EUR"
				}
			case k < 17:
				e = quota(agent, rng.Int64N(40), now)
			default:
				e = subscription(agent, created)
				e.Scope.Tools = []string{"free"}
				if rng.IntN(2) == 0 {
					e.Subscription.ValidUntil = ptr(now.Add(-time.Minute))
				}
			}
			if rng.IntN(5) == 0 {
				e.Scope.Service = entitlement.AnyService
			}
			switch rng.IntN(10) {
			case 0:
				e.ExpiresAt = ptr(now.Add(-time.Second))
			case 1, 2:
				e.ExpiresAt = ptr(now.Add(time.Duration(1+rng.IntN(48)) * time.Hour))
			}
			e = createEntitlement(p.t, s, e)
			if rng.IntN(10) == 0 {
				var err error
				if e, err = s.RevokeEntitlement(p.t.Context(), e.ID); err != nil {
					p.t.Fatalf("seed %d round %d: RevokeEntitlement: %v", p.seed, p.round, err)
				}
			}
			p.ents = append(p.ents, e)
		}
	}
}

// plan gives each caller its calls: keys drawn from a pool a third the size
// of all calls (so most keys are sent several times, by several callers and
// by several agents), each mostly sent with its one set of parameters and
// sometimes with others (a conflict, unless that one lands first).
func (p *property) plan(callers int) {
	rng := p.rng
	total := callers * callsPerCaller
	pool := max(4, total/3)
	p.specs = make(map[callKey]entitlement.ConsumeRequest)
	p.calls = make([][]call, callers)
	for c := range callers {
		for range callsPerCaller {
			k := callKey{p.agents[rng.IntN(len(p.agents))], fmt.Sprint("key-", rng.IntN(pool))}
			spec, ok := p.specs[k]
			if !ok {
				spec = p.newSpec(k)
				p.specs[k] = spec
			}
			req := spec
			if rng.IntN(10) == 0 {
				req.Units++ // other parameters, same key
			}
			p.calls[c] = append(p.calls[c], call{req: req})
		}
	}
}

func (p *property) newSpec(k callKey) entitlement.ConsumeRequest {
	rng := p.rng
	req := entitlement.ConsumeRequest{AgentID: k.agent, Service: testService, Tool: testTool, IdempotencyKey: k.key, Units: 1 + rng.Int64N(3)}
	switch rng.IntN(10) {
	case 0:
		req.Tool = "free"
	case 1:
		req.Service = "other"
	}
	if rng.IntN(10) != 0 {
		req.Cost = &money.Money{Cents: rng.Int64N(60), Currency: "USD"}
	}
	if rng.IntN(10) == 0 {
		req.EntitlementID = p.ents[rng.IntN(len(p.ents))].ID // maybe another agent's
	}
	return req
}

// checkResults checks every call's result against the others with its key
// and returns the one consumption of each key that was charged.
func (p *property) checkResults() map[callKey]*call {
	consumed := map[callKey]*call{}
	byKey := map[callKey][]*call{}
	for c := range p.calls {
		for i := range p.calls[c] {
			cl := &p.calls[c][i]
			k := callKey{cl.req.AgentID, cl.req.IdempotencyKey}
			byKey[k] = append(byKey[k], cl)
			switch {
			case cl.err != nil:
				p.errorf("CheckAndConsume(%s/%s): error %v, want a result", k.agent, k.key, cl.err)
			case cl.res.Outcome == store.Consumed:
				if prior := consumed[k]; prior != nil {
					p.errorf("key %s/%s charged twice: consumptions %s and %s", k.agent, k.key, prior.res.Consumption.ID, cl.res.Consumption.ID)
				}
				consumed[k] = cl
				p.checkConsumption(cl)
			case cl.res.Outcome == store.Denied:
				if cl.res.Consumption.ID != "" || len(cl.res.Denials) == 0 {
					p.errorf("denied %s/%s: consumption %v, denials %v; want none and at least one reason", k.agent, k.key, cl.res.Consumption, cl.res.Denials)
				}
			case cl.res.Outcome != store.Replay && cl.res.Outcome != store.Conflict:
				p.errorf("CheckAndConsume(%s/%s) = %q, not a CheckAndConsume outcome", k.agent, k.key, cl.res.Outcome)
			}
		}
	}
	for k, cls := range byKey {
		first := consumed[k]
		for _, cl := range cls {
			// Balances only fall during a round, so a call denied while the
			// same call (same key and parameters) was charged means a paid
			// call was refused: it must be a replay.
			if cl.res.Outcome == store.Denied && first != nil && cl.req.Fingerprint() == first.req.Fingerprint() {
				p.errorf("%s/%s denied %v although the same call was charged: want replay", k.agent, k.key, cl.res.Denials)
			}
			switch cl.res.Outcome {
			case store.Replay:
				switch {
				case first == nil:
					p.errorf("replay of %s/%s, but no call with that key was charged", k.agent, k.key)
				case cl.req.Fingerprint() != first.req.Fingerprint():
					p.errorf("replay of %s/%s with other parameters (units %d, charged %d): want conflict", k.agent, k.key, cl.req.Units, first.req.Units)
				case cl.res.Consumption.ID == "":
					p.errorf("replay of %s/%s without the consumption", k.agent, k.key)
				default:
					if d := cmpDiff(first.res.Consumption, cl.res.Consumption); d != "" {
						p.errorf("replay of %s/%s returned another consumption (-charged +replayed):\n%s", k.agent, k.key, d)
					}
				}
			case store.Conflict:
				switch {
				case first == nil:
					p.errorf("conflict on %s/%s, but no call with that key was charged", k.agent, k.key)
				case cl.req.Fingerprint() == first.req.Fingerprint():
					p.errorf("conflict on %s/%s with the charged call's own parameters: want replay", k.agent, k.key)
				case cl.res.Consumption.ID != "":
					p.errorf("conflict on %s/%s carries a consumption", k.agent, k.key)
				}
			}
		}
	}
	return consumed
}

// checkConsumption checks that a charged call's consumption matches its
// request and never records a balance or quota below zero.
func (p *property) checkConsumption(cl *call) {
	c, req := &cl.res.Consumption, cl.req
	if c.ID == "" || cl.res.Entitlement.ID == "" {
		p.errorf("consumed %s/%s without consumption or entitlement", req.AgentID, req.IdempotencyKey)
		return
	}
	if c.AgentID != req.AgentID || c.IdempotencyKey != req.IdempotencyKey || c.Service != req.Service || c.Tool != req.Tool ||
		c.Units != req.Units || (req.EntitlementID != "" && c.EntitlementID != req.EntitlementID) {
		p.errorf("consumption %+v does not match its request %+v", *c, req)
	}
	// The charged entitlement is the caller's own and was active.
	for _, e := range p.ents {
		if e.ID != c.EntitlementID {
			continue
		}
		if e.AgentID != req.AgentID {
			p.errorf("%s/%s charged entitlement %s of agent %s", req.AgentID, req.IdempotencyKey, e.ID, e.AgentID)
		}
		if e.Status == entitlement.StatusRevoked {
			p.errorf("%s/%s charged the revoked entitlement %s", req.AgentID, req.IdempotencyKey, e.ID)
		}
	}
	switch c.EntitlementType {
	case entitlement.TypeCredits:
		if req.Cost == nil || c.Cost != *req.Cost || c.BalanceAfter.Cents < 0 {
			p.errorf("credits consumption of %s/%s: cost %v (request %v), balanceAfter %v", req.AgentID, req.IdempotencyKey, c.Cost, req.Cost, c.BalanceAfter)
		}
	case entitlement.TypeQuota:
		if c.RemainingAfter == nil || *c.RemainingAfter < 0 {
			p.errorf("quota consumption of %s/%s: remainingAfter %v, want ≥ 0", req.AgentID, req.IdempotencyKey, c.RemainingAfter)
		}
	}
}

// checkStored compares the stored consumptions and entitlements with the
// charged calls: exactly the charged consumptions exist, no balance or quota
// is below zero, and each entitlement lost exactly what was charged to it.
// It returns the final entitlements by ID.
func (p *property) checkStored(s store.EntitlementStore, consumed map[callKey]*call) map[string]entitlement.Entitlement {
	finals := map[string]entitlement.Entitlement{}
	charged := map[string]int64{} // entitlement ID → cents or units
	for _, agent := range p.agents {
		stored := listConsumptionPages(p.t, s, agent, time.Time{}, store.MaxPageSize)
		seen := map[string]bool{}
		for _, c := range stored {
			k := callKey{agent, c.IdempotencyKey}
			cl := consumed[k]
			switch {
			case seen[c.IdempotencyKey]:
				p.errorf("two stored consumptions for %s/%s", agent, c.IdempotencyKey)
			case cl == nil:
				p.errorf("stored consumption %s for %s/%s, but no call reported it consumed", c.ID, agent, c.IdempotencyKey)
			default:
				if d := cmpDiff(cl.res.Consumption, c); d != "" {
					p.errorf("stored consumption of %s/%s differs from the call's (-call +stored):\n%s", agent, c.IdempotencyKey, d)
				}
			}
			seen[c.IdempotencyKey] = true
			if c.EntitlementType == entitlement.TypeCredits {
				charged[c.EntitlementID] += c.Cost.Cents
			} else if c.EntitlementType == entitlement.TypeQuota {
				charged[c.EntitlementID] += c.Units
			}
		}
		for k := range consumed {
			if k.agent == agent && !seen[k.key] {
				p.errorf("call %s/%s was consumed, but no consumption is stored", agent, k.key)
			}
		}
	}
	for _, initial := range p.ents {
		final, err := s.GetEntitlement(p.t.Context(), initial.ID)
		if err != nil {
			p.errorf("GetEntitlement(%s): %v", initial.ID, err)
			continue
		}
		finals[initial.ID] = final
		switch initial.Type {
		case entitlement.TypeCredits:
			if final.Credits.Balance.Cents < 0 || initial.Credits.Balance.Cents-final.Credits.Balance.Cents != charged[initial.ID] {
				p.errorf("credits %s: initial %d − final %d ≠ charged %d (or final < 0)", initial.ID, initial.Credits.Balance.Cents, final.Credits.Balance.Cents, charged[initial.ID])
			}
		case entitlement.TypeQuota:
			if final.Quota.Remaining < 0 || initial.Quota.Remaining-final.Quota.Remaining != charged[initial.ID] {
				p.errorf("quota %s: initial %d − final %d ≠ charged %d units (or final < 0)", initial.ID, initial.Quota.Remaining, final.Quota.Remaining, charged[initial.ID])
			}
		}
		if initial.Status == entitlement.StatusRevoked && charged[initial.ID] != 0 {
			p.errorf("revoked entitlement %s was charged %d", initial.ID, charged[initial.ID])
		}
	}
	return finals
}

// checkReplays sends a few charged keys again, as they were charged and
// with other parameters: Replay with the same consumption, then Conflict,
// and nothing charged.
func (p *property) checkReplays(s store.EntitlementStore, consumed map[callKey]*call, finals map[string]entitlement.Entitlement) {
	n := 0
	for k, first := range consumed {
		if n++; n > 8 {
			return
		}
		res, err := s.CheckAndConsume(p.t.Context(), first.req)
		if err != nil || res.Outcome != store.Replay || res.Consumption.ID == "" || cmpDiff(first.res.Consumption, res.Consumption) != "" {
			p.errorf("resending %s/%s = %s, %v; want replay of consumption %s", k.agent, k.key, res.Outcome, err, first.res.Consumption.ID)
		}
		other := first.req
		other.Units++
		res, err = s.CheckAndConsume(p.t.Context(), other)
		if err != nil || res.Outcome != store.Conflict || res.Consumption.ID != "" {
			p.errorf("resending %s/%s with other units = %s, %v; want conflict", k.agent, k.key, res.Outcome, err)
		}
		id := first.res.Consumption.EntitlementID
		if d := cmpDiff(finals[id], getEntitlement(p.t, s, id)); d != "" {
			p.errorf("resending %s/%s changed entitlement %s (-before +after):\n%s", k.agent, k.key, id, d)
		}
	}
}
