package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// denialCase is one way an entitlement refuses a call. setup returns the
// entitlement to create (already revoked ones are revoked after creation).
type denialCase struct {
	name   string
	reason entitlement.Reason
	setup  func(agent string, now time.Time) entitlement.Entitlement
	revoke bool
	// edit changes the request (default: 100 USD on testService/testTool).
	edit func(r *entitlement.ConsumeRequest)
}

var denialCases = []denialCase{
	{name: "Revoked", reason: entitlement.ReasonRevoked, revoke: true,
		setup: func(a string, now time.Time) entitlement.Entitlement { return credits(a, 1000, now) }},
	{name: "Expired", reason: entitlement.ReasonExpired,
		setup: func(a string, now time.Time) entitlement.Entitlement {
			e := credits(a, 1000, now.Add(-2*time.Hour))
			e.ExpiresAt = ptr(now) // an expiry exactly at now has passed
			return e
		}},
	{name: "SubscriptionOver", reason: entitlement.ReasonExpired,
		setup: func(a string, now time.Time) entitlement.Entitlement {
			e := subscription(a, now.Add(-48*time.Hour))
			e.Subscription.ValidUntil = ptr(now.Add(-time.Hour))
			return e
		}},
	{name: "SubscriptionNotStarted", reason: entitlement.ReasonExpired,
		setup: func(a string, now time.Time) entitlement.Entitlement {
			e := subscription(a, now)
			e.Subscription.ValidFrom = now.Add(time.Hour)
			return e
		}},
	{name: "ScopeService", reason: entitlement.ReasonScopeMismatch,
		setup: func(a string, now time.Time) entitlement.Entitlement {
			e := credits(a, 1000, now)
			e.Scope.Service = "mail"
			return e
		}},
	{name: "ScopeTool", reason: entitlement.ReasonScopeMismatch,
		setup: func(a string, now time.Time) entitlement.Entitlement {
			e := credits(a, 1000, now)
			e.Scope.Tools = []string{"fetch"}
			return e
		}},
	{name: "Currency", reason: entitlement.ReasonCurrencyMismatch,
		setup: func(a string, now time.Time) entitlement.Entitlement {
			e := credits(a, 1000, now)
			e.Credits.Balance = money.Money{Cents: 1000, Currency: "EUR"}
			e.Credits.Granted = e.Credits.Balance
			return e
		}},
	{name: "Balance", reason: entitlement.ReasonInsufficientBalance,
		setup: func(a string, now time.Time) entitlement.Entitlement { return credits(a, 99, now) }},
	{name: "CostRequired", reason: entitlement.ReasonCostRequired,
		setup: func(a string, now time.Time) entitlement.Entitlement { return credits(a, 1000, now) },
		edit:  func(r *entitlement.ConsumeRequest) { r.Cost = nil }},
	{name: "Quota", reason: entitlement.ReasonQuotaExhausted,
		setup: func(a string, now time.Time) entitlement.Entitlement { return quota(a, 2, now) },
		edit:  func(r *entitlement.ConsumeRequest) { r.Units = 3 }},
}

// denialSubtests expands every denial case into two subtests: prefix+name,
// the store choosing, and prefix+name+"Explicit", the entitlement named.
// Each creates the case's entitlement e and builds its request; deny makes
// the call under test with req and checks that it is denied with exactly
// want and changed nothing of e.
func denialSubtests(prefix string, deny func(t *testing.T, s store.EntitlementStore, e entitlement.Entitlement, req entitlement.ConsumeRequest, want []entitlement.Denial)) []subtest {
	var out []subtest
	for _, dc := range denialCases {
		for _, explicit := range []bool{false, true} {
			name := prefix + dc.name
			if explicit {
				name += "Explicit"
			}
			out = append(out, subtest{name, func(t *testing.T, s store.EntitlementStore, clock *Clock) {
				agent := newAgent()
				e := createEntitlement(t, s, dc.setup(agent, clock.Now()))
				if dc.revoke {
					revoke(t, s, e.ID)
				}
				req := request(agent, "k", 100)
				if dc.edit != nil {
					dc.edit(&req)
				}
				if explicit {
					req.EntitlementID = e.ID
				}
				want := []entitlement.Denial{{EntitlementID: e.ID, Reason: dc.reason}}
				if dc.revoke && !explicit { // a revoked entitlement is not a candidate
					want = []entitlement.Denial{{Reason: entitlement.ReasonNotFound}}
				}
				deny(t, s, e, req, want)
			}})
		}
	}
	return out
}

// everyReason creates three entitlements of agent that refuse a call of 100
// USD on testService/testTool for three different reasons, and returns their
// denials.
func everyReason(t *testing.T, s store.EntitlementStore, agent string, now time.Time) []entitlement.Denial {
	t.Helper()
	poor := createEntitlement(t, s, credits(agent, 10, now))
	used := quota(agent, 1, now)
	used.Quota.Remaining = 0
	used = createEntitlement(t, s, used)
	elsewhere := credits(agent, 1000, now)
	elsewhere.Scope.Service = "mail"
	elsewhere = createEntitlement(t, s, elsewhere)
	return []entitlement.Denial{
		{EntitlementID: poor.ID, Reason: entitlement.ReasonInsufficientBalance},
		{EntitlementID: used.ID, Reason: entitlement.ReasonQuotaExhausted},
		{EntitlementID: elsewhere.ID, Reason: entitlement.ReasonScopeMismatch},
	}
}

// denialTests run every denial case through CheckAndConsume: the reason,
// and neither a charge nor a stored consumption.
var denialTests = func() []subtest {
	out := denialSubtests("ConsumeDenied", func(t *testing.T, s store.EntitlementStore, e entitlement.Entitlement, req entitlement.ConsumeRequest, want []entitlement.Denial) {
		wantDenied(t, s, req, want...)
		if d := cmpDiff(e.Credits.Balance, getEntitlement(t, s, e.ID).Credits.Balance); d != "" {
			t.Errorf("balance changed by a denied call (-want +got):\n%s", d)
		}
		if got := listAllConsumptions(t, s, req.AgentID, time.Time{}); len(got) != 0 {
			t.Errorf("a denied call stored consumptions: %+v", got)
		}
	})
	return append(out,
		subtest{"ConsumeDeniedNoEntitlements", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
			wantDenied(t, s, request(newAgent(), "k", 1), entitlement.Denial{Reason: entitlement.ReasonNotFound})
		}},
		subtest{"ConsumeDeniedUnknownID", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			agent, _ := agentWithCredits(t, s, 1000, clock.Now())
			req := request(agent, "k", 1)
			req.EntitlementID = "no-such-entitlement"
			wantDenied(t, s, req, entitlement.Denial{EntitlementID: "no-such-entitlement", Reason: entitlement.ReasonNotFound})
		}},
		subtest{"ConsumeDeniedOtherAgentsEntitlement", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			agent := newAgent()
			theirs := createEntitlement(t, s, credits(newAgent(), 1000, clock.Now()))
			req := request(agent, "k", 1)
			req.EntitlementID = theirs.ID
			wantDenied(t, s, req, entitlement.Denial{EntitlementID: theirs.ID, Reason: entitlement.ReasonNotFound})
			if got := getEntitlement(t, s, theirs.ID).Credits.Balance; got != usd(1000) {
				t.Errorf("the other agent's balance = %v, want 1000 USD", got)
			}
		}},
		subtest{"ConsumeDeniedEveryReason", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
			agent := newAgent()
			wantDenied(t, s, request(agent, "k", 100), everyReason(t, s, agent, clock.Now())...)
		}},
	)
}()
