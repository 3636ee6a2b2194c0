package entitlement_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

var now = date("2026-03-10T12:00:00Z")

func usd(c int64) *money.Money { return &money.Money{Cents: c, Currency: "USD"} }

func credits(balance int64) entitlement.Entitlement {
	return entitlement.Entitlement{
		ID: "e-credits", AgentID: "a1", Type: entitlement.TypeCredits, Status: entitlement.StatusActive,
		Scope:   entitlement.Scope{Service: "search"},
		Credits: entitlement.Credits{Balance: *usd(balance), Granted: *usd(balance)},
	}
}

func quota(limit, remaining int64, resetAt time.Time) entitlement.Entitlement {
	return entitlement.Entitlement{
		ID: "e-quota", AgentID: "a1", Type: entitlement.TypeQuota, Status: entitlement.StatusActive,
		Scope: entitlement.Scope{Service: "*"},
		Quota: entitlement.Quota{Limit: limit, Period: entitlement.PeriodDay, Remaining: remaining,
			ResetAt: resetAt, Anchor: resetAt.Add(-24 * time.Hour)},
	}
}

func req(cost *money.Money, units int64) *entitlement.ConsumeRequest {
	return &entitlement.ConsumeRequest{AgentID: "a1", Service: "search", Tool: "web", IdempotencyKey: "k1", Cost: cost, Units: units}
}

func TestScope_Covers(t *testing.T) {
	tests := []struct {
		scope         entitlement.Scope
		service, tool string
		want          bool
	}{
		{entitlement.Scope{Service: "search"}, "search", "web", true},
		{entitlement.Scope{Service: "search"}, "maps", "web", false},
		{entitlement.Scope{Service: "*"}, "maps", "route", true},
		{entitlement.Scope{Service: "search", Tools: []string{"web", "news"}}, "search", "news", true},
		{entitlement.Scope{Service: "search", Tools: []string{"web"}}, "search", "images", false},
		{entitlement.Scope{Service: "*", Tools: []string{"web"}}, "other", "web", true},
		{entitlement.Scope{Service: "Search"}, "search", "web", false},
	}
	for _, tt := range tests {
		if got := tt.scope.Covers(tt.service, tt.tool); got != tt.want {
			t.Errorf("%+v.Covers(%q, %q) = %v, want %v", tt.scope, tt.service, tt.tool, got, tt.want)
		}
	}
}

func TestEntitlement_Consume(t *testing.T) {
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	var zero time.Time // 0001-01-01T00:00:00Z: an instant like any other, long past
	tests := []struct {
		name       string
		e          entitlement.Entitlement
		r          *entitlement.ConsumeRequest
		wantReason entitlement.Reason
		check      func(t *testing.T, e entitlement.Entitlement, c entitlement.Consumption)
	}{
		{name: "CreditsDebit", e: credits(500), r: req(usd(200), 0), check: func(t *testing.T, e entitlement.Entitlement, c entitlement.Consumption) {
			if e.Credits.Balance.Cents != 300 || c.BalanceAfter.Cents != 300 || c.Cost.Cents != 200 {
				t.Errorf("balance %d, balanceAfter %d, cost %d; want 300, 300, 200", e.Credits.Balance.Cents, c.BalanceAfter.Cents, c.Cost.Cents)
			}
		}},
		{name: "CreditsExactBalance", e: credits(200), r: req(usd(200), 0), check: func(t *testing.T, e entitlement.Entitlement, _ entitlement.Consumption) {
			if e.Credits.Balance.Cents != 0 {
				t.Errorf("balance = %d, want 0", e.Credits.Balance.Cents)
			}
		}},
		{name: "CreditsZeroCost", e: credits(0), r: req(usd(0), 0)},
		{name: "CreditsInsufficient", e: credits(199), r: req(usd(200), 0), wantReason: entitlement.ReasonInsufficientBalance},
		{name: "CreditsCurrencyMismatch", e: credits(500), r: req(&money.Money{Cents: 1, Currency: "EUR"}, 0), wantReason: entitlement.ReasonCurrencyMismatch},
		{name: "CreditsNoCost", e: credits(500), r: req(nil, 0), wantReason: entitlement.ReasonCostRequired},
		{name: "Revoked", e: func() entitlement.Entitlement { e := credits(500); e.Status = entitlement.StatusRevoked; return e }(), r: req(usd(1), 0), wantReason: entitlement.ReasonRevoked},
		{name: "ExpiredExactlyNow", e: func() entitlement.Entitlement { e := credits(500); e.ExpiresAt = &now; return e }(), r: req(usd(1), 0), wantReason: entitlement.ReasonExpired},
		{name: "NotYetExpired", e: func() entitlement.Entitlement { e := credits(500); e.ExpiresAt = &future; return e }(), r: req(usd(1), 0)},
		{name: "ExpiresAtZeroInstant", e: func() entitlement.Entitlement { e := credits(500); e.ExpiresAt = &zero; return e }(), r: req(usd(1), 0), wantReason: entitlement.ReasonExpired},
		{name: "ScopeMismatch", e: func() entitlement.Entitlement { e := credits(500); e.Scope.Service = "maps"; return e }(), r: req(usd(1), 0), wantReason: entitlement.ReasonScopeMismatch},
		{name: "QuotaLastUnit", e: quota(10, 1, future), r: req(nil, 1), check: func(t *testing.T, e entitlement.Entitlement, c entitlement.Consumption) {
			if e.Quota.Remaining != 0 || c.RemainingAfter == nil || *c.RemainingAfter != 0 {
				t.Errorf("remaining %d, remainingAfter %v; want 0, 0", e.Quota.Remaining, c.RemainingAfter)
			}
		}},
		{name: "QuotaExhausted", e: quota(10, 0, future), r: req(nil, 1), wantReason: entitlement.ReasonQuotaExhausted},
		{name: "QuotaMoreUnitsThanLeft", e: quota(10, 2, future), r: req(nil, 3), wantReason: entitlement.ReasonQuotaExhausted},
		{name: "QuotaResetExactlyAtNow", e: quota(10, 0, now), r: req(nil, 4), check: func(t *testing.T, e entitlement.Entitlement, _ entitlement.Consumption) {
			if e.Quota.Remaining != 6 || !e.Quota.ResetAt.Equal(now.Add(24*time.Hour)) {
				t.Errorf("remaining %d, resetAt %s; want 6, %s", e.Quota.Remaining, e.Quota.ResetAt, now.Add(24*time.Hour))
			}
		}},
		{name: "QuotaResetSkipsMissedDays", e: quota(10, 0, past.Add(-72*time.Hour)), r: req(nil, 1), check: func(t *testing.T, e entitlement.Entitlement, _ entitlement.Consumption) {
			if want := past.Add(24 * time.Hour); e.Quota.Remaining != 9 || !e.Quota.ResetAt.Equal(want) {
				t.Errorf("remaining %d, resetAt %s; want 9, %s", e.Quota.Remaining, e.Quota.ResetAt, want)
			}
		}},
		{name: "QuotaUnitsExceedLimit", e: quota(3, 0, past), r: req(nil, 4), wantReason: entitlement.ReasonQuotaExhausted},
		{name: "SubscriptionInside", e: entitlement.Entitlement{ID: "s", Type: entitlement.TypeSubscription, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, Subscription: entitlement.Subscription{ValidFrom: past, ValidUntil: &future}}, r: req(nil, 0)},
		{name: "SubscriptionWithoutEnd", e: entitlement.Entitlement{ID: "s", Type: entitlement.TypeSubscription, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, Subscription: entitlement.Subscription{ValidFrom: past}}, r: req(nil, 0)},
		{name: "SubscriptionUntilZeroInstant", e: entitlement.Entitlement{ID: "s", Type: entitlement.TypeSubscription, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, Subscription: entitlement.Subscription{ValidFrom: zero, ValidUntil: &zero}}, r: req(nil, 0), wantReason: entitlement.ReasonExpired},
		{name: "SubscriptionEndedExactlyNow", e: entitlement.Entitlement{ID: "s", Type: entitlement.TypeSubscription, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, Subscription: entitlement.Subscription{ValidFrom: past, ValidUntil: &now}}, r: req(nil, 0), wantReason: entitlement.ReasonExpired},
		{name: "SubscriptionNotStarted", e: entitlement.Entitlement{ID: "s", Type: entitlement.TypeSubscription, Status: entitlement.StatusActive,
			Scope: entitlement.Scope{Service: "search"}, Subscription: entitlement.Subscription{ValidFrom: future, ValidUntil: new(future.Add(time.Hour))}}, r: req(nil, 0), wantReason: entitlement.ReasonExpired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.e
			before := tt.e
			c, reason := e.Consume(now, tt.r, "c-1", tt.r.Fingerprint())
			if reason != tt.wantReason {
				t.Fatalf("Consume reason = %q, want %q", reason, tt.wantReason)
			}
			if reason != "" {
				if e.Type != entitlement.TypeQuota && !cmp.Equal(e, before) {
					t.Errorf("denied Consume changed the entitlement: %s", cmp.Diff(before, e))
				}
				return
			}
			if c.ID != "c-1" || c.EntitlementID != e.ID || c.Fingerprint != tt.r.Fingerprint() || !c.OccurredAt.Equal(now) {
				t.Errorf("consumption = %+v: wrong id, entitlement, fingerprint or time", c)
			}
			if tt.check != nil {
				tt.check(t, e, c)
			}
		})
	}
}

func TestConsumeRequest_Normalize(t *testing.T) {
	valid := func() entitlement.ConsumeRequest {
		return entitlement.ConsumeRequest{AgentID: "a", Service: "s", Tool: "t", IdempotencyKey: "k"}
	}
	tests := []struct {
		name      string
		mutate    func(r *entitlement.ConsumeRequest)
		wantField string
	}{
		{"Valid", func(r *entitlement.ConsumeRequest) {}, ""},
		{"Key255", func(r *entitlement.ConsumeRequest) { r.IdempotencyKey = strings.Repeat("k", 255) }, ""},
		{"KeyWithSlashAndSpace", func(r *entitlement.ConsumeRequest) { r.IdempotencyKey = "a/b c" }, ""},
		{"Key256", func(r *entitlement.ConsumeRequest) { r.IdempotencyKey = strings.Repeat("k", 256) }, "idempotencyKey"},
		{"KeyControlChar", func(r *entitlement.ConsumeRequest) { r.IdempotencyKey = "a\nb" }, "idempotencyKey"},
		{"KeyNonASCII", func(r *entitlement.ConsumeRequest) { r.IdempotencyKey = "ключ" }, "idempotencyKey"},
		{"MissingService", func(r *entitlement.ConsumeRequest) { r.Service = "" }, "service"},
		{"WildcardService", func(r *entitlement.ConsumeRequest) { r.Service = "*" }, "service"},
		{"MissingTool", func(r *entitlement.ConsumeRequest) { r.Tool = "" }, "tool"},
		{"MissingAgent", func(r *entitlement.ConsumeRequest) { r.AgentID = "" }, "agentId"},
		{"NegativeUnits", func(r *entitlement.ConsumeRequest) { r.Units = -1 }, "units"},
		{"TooManyUnits", func(r *entitlement.ConsumeRequest) { r.Units = entitlement.MaxUnits + 1 }, "units"},
		{"NegativeCost", func(r *entitlement.ConsumeRequest) { r.Cost = usd(-1) }, "cost.cents"},
		{"CostPastCeiling", func(r *entitlement.ConsumeRequest) { r.Cost = usd(money.MaxCents + 1) }, "cost.cents"},
		{"CostBadCurrency", func(r *entitlement.ConsumeRequest) { r.Cost = &money.Money{Cents: 1, Currency: "usd"} }, "cost.currency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := valid()
			tt.mutate(&r)
			err := r.Normalize()
			if tt.wantField == "" {
				if err != nil || r.Units != 1 {
					t.Fatalf("Normalize() = %v with units %d; want nil and units 1", err, r.Units)
				}
				return
			}
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Fatalf("Normalize() = %v, want a *field.Error on %q", err, tt.wantField)
			}
		})
	}
}

func TestFingerprintAndConsumptionKey(t *testing.T) {
	a := req(usd(5), 0)
	b := req(usd(5), 1)
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("units 0 and 1 should fingerprint the same (0 means 1)")
	}
	for _, mutate := range []func(r *entitlement.ConsumeRequest){
		func(r *entitlement.ConsumeRequest) { r.Cost = usd(6) },
		func(r *entitlement.ConsumeRequest) { r.Cost = nil },
		func(r *entitlement.ConsumeRequest) { r.Tool = "other" },
		func(r *entitlement.ConsumeRequest) { r.Units = 2 },
		func(r *entitlement.ConsumeRequest) { r.EntitlementID = "e" },
		func(r *entitlement.ConsumeRequest) { r.Service, r.Tool = "searchw", "eb" },
	} {
		c := *a
		mutate(&c)
		if c.Fingerprint() == a.Fingerprint() {
			t.Errorf("fingerprint of %+v equals that of %+v", c, *a)
		}
	}
	if entitlement.ConsumptionKey("a1", "k") == entitlement.ConsumptionKey("a2", "k") {
		t.Error("two agents with one key share a consumption key")
	}
	if entitlement.ConsumptionKey("a", "bk") == entitlement.ConsumptionKey("ab", "k") {
		t.Error("agent/key boundary is ambiguous")
	}
	if k := entitlement.ConsumptionKey("a", "x/y"); strings.ContainsAny(k, "/.") || len(k) != 64 {
		t.Errorf("ConsumptionKey = %q, want 64 hex digits", k)
	}
}

func TestSortCandidates(t *testing.T) {
	t1, t2 := now.Add(time.Hour), now.Add(2*time.Hour)
	es := []entitlement.Entitlement{
		{ID: "credits-old", Type: entitlement.TypeCredits, CreatedAt: now.Add(-2 * time.Hour)},
		{ID: "credits-expiring", Type: entitlement.TypeCredits, CreatedAt: now, ExpiresAt: &t2},
		{ID: "quota-b", Type: entitlement.TypeQuota, CreatedAt: now},
		{ID: "quota-a", Type: entitlement.TypeQuota, CreatedAt: now},
		{ID: "quota-older", Type: entitlement.TypeQuota, CreatedAt: now.Add(-time.Hour)},
		{ID: "sub-forever", Type: entitlement.TypeSubscription},
		{ID: "sub-late", Type: entitlement.TypeSubscription, Subscription: entitlement.Subscription{ValidUntil: &t2}},
		{ID: "sub-early", Type: entitlement.TypeSubscription, Subscription: entitlement.Subscription{ValidUntil: &t1}},
		{ID: "sub-zero", Type: entitlement.TypeSubscription, Subscription: entitlement.Subscription{ValidUntil: new(time.Time)}},
	}
	entitlement.SortCandidates(es)
	var got []string
	for _, e := range es {
		got = append(got, e.ID)
	}
	want := []string{"sub-zero", "sub-early", "sub-late", "sub-forever", "quota-older", "quota-a", "quota-b", "credits-expiring", "credits-old"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SortCandidates order (-want +got):\n%s", diff)
	}
}

func TestCandidates(t *testing.T) {
	t1 := now.Add(time.Hour)
	es := []*entitlement.Entitlement{
		{ID: "credits", Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		{ID: "other-service", Type: entitlement.TypeSubscription, Scope: entitlement.Scope{Service: "maps"}},
		{ID: "other-tool", Type: entitlement.TypeQuota, Scope: entitlement.Scope{Service: "search", Tools: []string{"news"}}},
		{ID: "quota-any", Type: entitlement.TypeQuota, Scope: entitlement.Scope{Service: "*"}, ExpiresAt: &t1},
	}
	got, denials := entitlement.Candidates(nil, es, "search", "web")
	var ids []string
	for _, e := range got {
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff([]string{"quota-any", "credits"}, ids); diff != "" {
		t.Errorf("Candidates order (-want +got):\n%s", diff)
	}
	wantDenials := []entitlement.Denial{
		{EntitlementID: "other-service", Reason: entitlement.ReasonScopeMismatch},
		{EntitlementID: "other-tool", Reason: entitlement.ReasonScopeMismatch},
	}
	if diff := cmp.Diff(wantDenials, denials); diff != "" {
		t.Errorf("Candidates denials (-want +got):\n%s", diff)
	}
	if es[0].ID != "credits" || es[3].ID != "quota-any" {
		t.Error("Candidates reordered its input")
	}
}

func TestConsumption_Depleted(t *testing.T) {
	zero, one := int64(0), int64(1)
	tests := []struct {
		c    entitlement.Consumption
		want bool
	}{
		{entitlement.Consumption{EntitlementType: entitlement.TypeCredits, Cost: *usd(40), BalanceAfter: *usd(0)}, true},
		{entitlement.Consumption{EntitlementType: entitlement.TypeCredits, Cost: *usd(40), BalanceAfter: *usd(1)}, false},
		{entitlement.Consumption{EntitlementType: entitlement.TypeCredits, Cost: *usd(0), BalanceAfter: *usd(0)}, false},
		{entitlement.Consumption{EntitlementType: entitlement.TypeQuota, RemainingAfter: &zero}, true},
		{entitlement.Consumption{EntitlementType: entitlement.TypeQuota, RemainingAfter: &one}, false},
		{entitlement.Consumption{EntitlementType: entitlement.TypeSubscription}, false},
	}
	for _, tt := range tests {
		if got := tt.c.Depleted(); got != tt.want {
			t.Errorf("%+v.Depleted() = %v, want %v", tt.c, got, tt.want)
		}
	}
}
