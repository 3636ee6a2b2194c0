package entitlement_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// TestBalanceOf_CapsTotals: totals past 2^53−1 (money.MaxCents) are shown
// capped at it, for credits and quota alike, as docs/api.md says: never a
// number a JSON client cannot read exactly, never an overflow.
func TestBalanceOf_CapsTotals(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	credits := func(id string, cents int64) entitlement.Entitlement {
		usd := money.Money{Cents: cents, Currency: "USD"}
		return entitlement.Entitlement{ID: id, AgentID: "a", Type: entitlement.TypeCredits, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "s"}, Credits: entitlement.Credits{Balance: usd, Granted: usd}}
	}
	quota := func(id string, units int64) entitlement.Entitlement {
		return entitlement.Entitlement{ID: id, AgentID: "a", Type: entitlement.TypeQuota, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "s"}, Quota: entitlement.Quota{Limit: units, Remaining: units,
				Period: entitlement.PeriodDay, Anchor: now, ResetAt: now.Add(time.Hour)}}
	}
	var es []entitlement.Entitlement
	for i := range 3 {
		es = append(es, credits(fmt.Sprint("c", i), money.MaxCents), quota(fmt.Sprint("q", i), 1<<52))
	}
	b := entitlement.BalanceOf("a", es, now)
	if len(b.Credits) != 1 || b.Credits[0].Total.Cents != money.MaxCents || b.Credits[0].Available.Cents != money.MaxCents {
		t.Errorf("credits of 3 × 2^53−1: %+v, want total and available capped at %d", b.Credits, money.MaxCents)
	}
	if len(b.Quotas) != 1 || b.Quotas[0].Limit != money.MaxCents || b.Quotas[0].Remaining != money.MaxCents || b.Quotas[0].Available != money.MaxCents {
		t.Errorf("quotas of 3 × 2^52: %+v, want limit, remaining and available capped at %d", b.Quotas, money.MaxCents)
	}
	if len(b.Credits) == 1 && b.Credits[0].Entitlements != 3 {
		t.Errorf("credits entitlements = %d, want 3 (capping counts every one)", b.Credits[0].Entitlements)
	}
}
