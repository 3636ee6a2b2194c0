package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var selectionTests = []subtest{
	{"SelectSubscriptionQuotaCredits", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		c, q, sub := oneOfEach(t, s, agent, clock.Now())
		if got := mustConsume(t, s, request(agent, "1", 10)).Consumption.EntitlementID; got != sub.ID {
			t.Errorf("first pick = %s, want the subscription %s", got, sub.ID)
		}
		revoke(t, s, sub.ID)
		if got := mustConsume(t, s, request(agent, "2", 10)).Consumption.EntitlementID; got != q.ID {
			t.Errorf("pick without the subscription = %s, want the quota %s", got, q.ID)
		}
		res := mustConsume(t, s, request(agent, "3", 10)) // the quota is used up
		if res.Consumption.EntitlementID != c.ID || res.Consumption.BalanceAfter != usd(990) {
			t.Errorf("pick after the quota = %s (balance %v), want the credits %s (990 USD)", res.Consumption.EntitlementID, res.Consumption.BalanceAfter, c.ID)
		}
	}},
	{"SelectEarliestExpiry", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		never := createEntitlement(t, s, credits(agent, 10, now.Add(-3*time.Hour)))
		late := credits(agent, 10, now.Add(-2*time.Hour))
		late.ExpiresAt = ptr(now.Add(48 * time.Hour))
		late = createEntitlement(t, s, late)
		soon := credits(agent, 10, now.Add(-time.Hour))
		soon.ExpiresAt = ptr(now.Add(time.Hour))
		soon = createEntitlement(t, s, soon)
		for i, want := range []string{soon.ID, late.ID, never.ID} {
			res := mustConsume(t, s, request(agent, string(rune('a'+i)), 10))
			if res.Consumption.EntitlementID != want {
				t.Errorf("call %d charged %s, want %s (earliest expiry first, none last)", i, res.Consumption.EntitlementID, want)
			}
		}
	}},
	{"SelectOldest", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		newer := createEntitlement(t, s, credits(agent, 10, now))
		older := createEntitlement(t, s, credits(agent, 10, now.Add(-time.Minute)))
		for i, want := range []string{older.ID, newer.ID} {
			res := mustConsume(t, s, request(agent, string(rune('a'+i)), 10))
			if res.Consumption.EntitlementID != want {
				t.Errorf("call %d charged %s, want %s (oldest first)", i, res.Consumption.EntitlementID, want)
			}
		}
		wantDenied(t, s, request(agent, "c", 10),
			entitlement.Denial{EntitlementID: older.ID, Reason: entitlement.ReasonInsufficientBalance},
			entitlement.Denial{EntitlementID: newer.ID, Reason: entitlement.ReasonInsufficientBalance})
	}},
	{"SelectSkipsRefusing", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		eur := credits(agent, 1000, now.Add(-time.Hour))
		eur.Credits.Balance.Currency, eur.Credits.Granted.Currency = "EUR", "EUR"
		createEntitlement(t, s, eur)
		usdOK := createEntitlement(t, s, credits(agent, 1000, now))
		res := mustConsume(t, s, request(agent, "k", 5))
		if res.Consumption.EntitlementID != usdOK.ID {
			t.Errorf("charged %s, want %s (the EUR credits refuse a USD cost)", res.Consumption.EntitlementID, usdOK.ID)
		}
	}},
}
