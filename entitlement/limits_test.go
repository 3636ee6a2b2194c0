package entitlement_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// limited returns e with u applied at now, failing the test on error.
func limited(t *testing.T, e entitlement.Entitlement, u entitlement.Update) entitlement.Entitlement {
	t.Helper()
	if err := e.Apply(u, now); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return e
}

func daily(max money.Money, units int64) *entitlement.Set[entitlement.SpendLimit] {
	return &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: max, MaxUnits: units}}
}

func consume(t *testing.T, e *entitlement.Entitlement, at time.Time, r *entitlement.ConsumeRequest) (entitlement.Consumption, entitlement.Reason) {
	t.Helper()
	return e.Consume(at, r, "c", r.Fingerprint())
}

func TestEntitlement_MaxPerCall(t *testing.T) {
	e := limited(t, credits(1000), entitlement.Update{MaxPerCall: &entitlement.Set[*money.Money]{To: usd(50)}})
	if _, reason := consume(t, &e, now, req(usd(51), 1)); reason != entitlement.ReasonMaxPerCall {
		t.Errorf("Consume(51) under maxPerCall 50 = %q, want %q", reason, entitlement.ReasonMaxPerCall)
	}
	if _, reason := consume(t, &e, now, req(usd(50), 1)); reason != "" {
		t.Errorf("Consume(50) under maxPerCall 50 = %q, want consumed", reason)
	}
	if _, reason := e.Authorize(now, holdReq(usd(51), 1, "h"), "h", "fp"); reason != entitlement.ReasonMaxPerCall {
		t.Errorf("Authorize(51) under maxPerCall 50 = %q, want %q", reason, entitlement.ReasonMaxPerCall)
	}
	// A more pressing reason comes first: the currency, the balance.
	if _, reason := consume(t, &e, now, req(&money.Money{Cents: 60, Currency: "EUR"}, 1)); reason != entitlement.ReasonCurrencyMismatch {
		t.Errorf("Consume(60 EUR) = %q, want %q", reason, entitlement.ReasonCurrencyMismatch)
	}

	q := limited(t, quota(100, 100, now.Add(time.Hour)), entitlement.Update{MaxUnitsPerCall: &entitlement.Set[*int64]{To: new(int64(5))}})
	if _, reason := consume(t, &q, now, req(nil, 6)); reason != entitlement.ReasonMaxPerCall {
		t.Errorf("Consume(6 units) under maxUnitsPerCall 5 = %q, want %q", reason, entitlement.ReasonMaxPerCall)
	}
	if _, reason := consume(t, &q, now, req(nil, 5)); reason != "" {
		t.Errorf("Consume(5 units) under maxUnitsPerCall 5 = %q, want consumed", reason)
	}
}

func TestEntitlement_SpendLimit(t *testing.T) {
	t.Run("CreditsPerDay", func(t *testing.T) {
		e := limited(t, credits(1000), entitlement.Update{SpendLimit: daily(*usd(100), 0)})
		if want := now.Add(24 * time.Hour); !e.Limits.Spend.ResetAt.Equal(want) || e.Limits.Spend.Spent != *usd(0) {
			t.Fatalf("new limit = %+v, want resetAt %s and 0 USD spent", e.Limits.Spend, want)
		}
		for i := range 2 {
			if _, reason := consume(t, &e, now, req(usd(50), 1)); reason != "" {
				t.Fatalf("Consume %d of 50 under 100/day = %q", i, reason)
			}
		}
		if _, reason := consume(t, &e, now, req(usd(1), 1)); reason != entitlement.ReasonSpendLimit {
			t.Errorf("Consume(1) with the day's 100 spent = %q, want %q", reason, entitlement.ReasonSpendLimit)
		}
		if got := e.Limits.Spend.Spent.Cents; got != 100 {
			t.Errorf("spent = %d, want 100", got)
		}
		// The next period starts lazily with nothing spent, missed ones skipped.
		later := now.Add(72*time.Hour + time.Minute)
		if _, reason := consume(t, &e, later, req(usd(100), 1)); reason != "" {
			t.Errorf("Consume(100) three days later = %q, want consumed", reason)
		}
		if want := now.Add(96 * time.Hour); !e.Limits.Spend.ResetAt.Equal(want) || e.Limits.Spend.Spent.Cents != 100 {
			t.Errorf("after the reset: %+v, want 100 spent, resetAt %s", e.Limits.Spend, want)
		}
	})
	t.Run("QuotaUnitsPerDay", func(t *testing.T) {
		e := limited(t, quota(1000, 1000, now.Add(30*24*time.Hour)), entitlement.Update{SpendLimit: daily(money.Money{}, 3)})
		if _, reason := consume(t, &e, now, req(nil, 3)); reason != "" {
			t.Fatalf("Consume(3 units) under 3/day = %q", reason)
		}
		if _, reason := consume(t, &e, now, req(nil, 1)); reason != entitlement.ReasonSpendLimit {
			t.Errorf("Consume(1 unit) with 3 spent = %q, want %q", reason, entitlement.ReasonSpendLimit)
		}
	})
	t.Run("HoldsReserveAgainstIt", func(t *testing.T) {
		// Decision: a hold that could take the spend over the limit is
		// refused, never capped; what it reserves counts until it ends.
		e := limited(t, credits(1000), entitlement.Update{SpendLimit: daily(*usd(100), 0)})
		if _, reason := e.Authorize(now, holdReq(usd(101), 1, "big"), "big", "fp"); reason != entitlement.ReasonSpendLimit {
			t.Fatalf("Authorize(101) under 100/day = %q, want %q", reason, entitlement.ReasonSpendLimit)
		}
		h, reason := e.Authorize(now, holdReq(usd(60), 1, "h"), "h", "fp")
		if reason != "" {
			t.Fatalf("Authorize(60) = %q", reason)
		}
		if _, reason := consume(t, &e, now, req(usd(41), 1)); reason != entitlement.ReasonSpendLimit {
			t.Errorf("Consume(41) with 60 held = %q, want %q", reason, entitlement.ReasonSpendLimit)
		}
		// A capture counts what it charged; the rest of the hold is room again.
		if _, ok := e.Capture(now, &h, entitlement.Charge{Cost: *usd(30), Units: 1}, "c2"); !ok {
			t.Fatal("Capture refused")
		}
		if got := e.Limits.Spend.Spent.Cents; got != 30 {
			t.Errorf("spent after capturing 30 = %d, want 30", got)
		}
		if _, reason := consume(t, &e, now, req(usd(70), 1)); reason != "" {
			t.Errorf("Consume(70) with 30 spent = %q, want consumed", reason)
		}
		// A release does not count.
		e2 := limited(t, credits(1000), entitlement.Update{SpendLimit: daily(*usd(100), 0)})
		h2, _ := e2.Authorize(now, holdReq(usd(100), 1, "h2"), "h2", "fp")
		e2.Release(now, &h2)
		if got := e2.Limits.Spend.Spent.Cents; got != 0 {
			t.Errorf("spent after a release = %d, want 0", got)
		}
	})
	t.Run("RefundGivesBackToItsPeriod", func(t *testing.T) {
		e := limited(t, credits(1000), entitlement.Update{SpendLimit: daily(*usd(100), 0)})
		c, _ := consume(t, &e, now, req(usd(80), 1))
		if err := e.Refund(now, &c, entitlement.Amount{Cost: usd(30)}); err != nil {
			t.Fatal(err)
		}
		if got := e.Limits.Spend.Spent.Cents; got != 50 {
			t.Errorf("spent after refunding 30 of 80 = %d, want 50", got)
		}
		// A charge of yesterday refunded today leaves today's spend alone.
		tomorrow := now.Add(25 * time.Hour)
		c2, _ := consume(t, &e, now, req(usd(10), 1))
		if _, reason := consume(t, &e, tomorrow, req(usd(40), 1)); reason != "" {
			t.Fatal(reason)
		}
		if err := e.Refund(tomorrow, &c2, entitlement.Amount{}); err != nil {
			t.Fatal(err)
		}
		if got := e.Limits.Spend.Spent.Cents; got != 40 {
			t.Errorf("spent after refunding yesterday's charge = %d, want 40", got)
		}
	})
	t.Run("ChangingIt", func(t *testing.T) {
		e := limited(t, credits(1000), entitlement.Update{SpendLimit: daily(*usd(100), 0)})
		consume(t, &e, now, req(usd(80), 1))
		later := now.Add(time.Hour)
		// The same period keeps what was spent: a lower max applies to it.
		if err := e.Apply(entitlement.Update{SpendLimit: daily(*usd(90), 0)}, later); err != nil {
			t.Fatal(err)
		}
		if _, reason := consume(t, &e, later, req(usd(11), 1)); reason != entitlement.ReasonSpendLimit {
			t.Errorf("Consume(11) with 80 of 90 spent = %q, want %q", reason, entitlement.ReasonSpendLimit)
		}
		// Another period starts afresh, from now.
		week := &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodWeek, Max: *usd(90)}}
		if err := e.Apply(entitlement.Update{SpendLimit: week}, later); err != nil {
			t.Fatal(err)
		}
		if s := e.Limits.Spend; s.Spent.Cents != 0 || !s.Anchor.Equal(later) || !s.ResetAt.Equal(later.Add(7*24*time.Hour)) {
			t.Errorf("weekly limit = %+v, want nothing spent, anchored at %s", s, later)
		}
		if err := e.Apply(entitlement.Update{SpendLimit: &entitlement.Set[entitlement.SpendLimit]{}}, later); err != nil || !e.Limits.IsZero() {
			t.Errorf("removing the limit: %v, limits %+v", err, e.Limits)
		}
	})
}

func TestEntitlement_Apply(t *testing.T) {
	eur := &money.Money{Cents: 5, Currency: "EUR"}
	sub := entitlement.Entitlement{ID: "s", AgentID: "a1", Type: entitlement.TypeSubscription, Status: entitlement.StatusActive,
		Scope: entitlement.Scope{Service: "search"}, Subscription: entitlement.Subscription{ValidFrom: now}}
	alerts := func(as ...entitlement.Alert) *entitlement.Set[[]entitlement.Alert] {
		return &entitlement.Set[[]entitlement.Alert]{To: as}
	}
	tests := []struct {
		name      string
		e         entitlement.Entitlement
		u         entitlement.Update
		wantField string
	}{
		{"MaxPerCallOtherCurrency", credits(100), entitlement.Update{MaxPerCall: &entitlement.Set[*money.Money]{To: eur}}, "limits.maxPerCall.currency"},
		{"MaxPerCallZero", credits(100), entitlement.Update{MaxPerCall: &entitlement.Set[*money.Money]{To: usd(0)}}, "limits.maxPerCall.cents"},
		{"MaxPerCallOnQuota", quota(10, 10, now.Add(time.Hour)), entitlement.Update{MaxPerCall: &entitlement.Set[*money.Money]{To: usd(1)}}, "limits.maxPerCall"},
		{"MaxUnitsPerCallOnCredits", credits(100), entitlement.Update{MaxUnitsPerCall: &entitlement.Set[*int64]{To: new(int64(1))}}, "limits.maxUnitsPerCall"},
		{"MaxUnitsPerCallZero", quota(10, 10, now.Add(time.Hour)), entitlement.Update{MaxUnitsPerCall: &entitlement.Set[*int64]{To: new(int64(0))}}, "limits.maxUnitsPerCall"},
		{"SpendLimitOtherCurrency", credits(100), entitlement.Update{SpendLimit: daily(*eur, 0)}, "limits.spendLimit.max.currency"},
		{"SpendLimitWithoutMax", credits(100), entitlement.Update{SpendLimit: daily(money.Money{}, 0)}, "limits.spendLimit.max"},
		{"SpendLimitUnitsOnCredits", credits(100), entitlement.Update{SpendLimit: daily(*usd(1), 5)}, "limits.spendLimit.maxUnits"},
		{"SpendLimitBadPeriod", credits(100), entitlement.Update{SpendLimit: &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: "year", Max: *usd(1)}}}, "limits.spendLimit.period"},
		{"SpendLimitWithoutPeriod", credits(100), entitlement.Update{SpendLimit: &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Max: *usd(1)}}}, "limits.spendLimit.period"},
		{"LimitsOnSubscription", sub, entitlement.Update{SpendLimit: daily(money.Money{}, 5)}, "limits"},
		{"AlertNegativeAmount", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{Amount: usd(-1)})}, "alerts[0].amount.cents"},
		{"AlertOtherCurrency", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{Amount: eur})}, "alerts[0].amount.currency"},
		{"AlertNegativeUnits", quota(10, 10, now.Add(time.Hour)), entitlement.Update{Alerts: alerts(entitlement.Alert{Units: new(int64(-1))})}, "alerts[0].units"},
		{"AlertPercentZero", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{Amount: usd(5)}, entitlement.Alert{Percent: new(int64(0))})}, "alerts[1].percent"},
		{"AlertPercentOver100", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{Percent: new(int64(101))})}, "alerts[0].percent"},
		{"AlertTwoKinds", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{Amount: usd(5), Percent: new(int64(5))})}, "alerts[0]"},
		{"AlertNone", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{})}, "alerts[0]"},
		{"AlertUnitsOnCredits", credits(100), entitlement.Update{Alerts: alerts(entitlement.Alert{Units: new(int64(1))})}, "alerts[0].units"},
		{"AlertsOnSubscription", sub, entitlement.Update{Alerts: alerts(entitlement.Alert{Percent: new(int64(5))})}, "alerts"},
		{"TooManyAlerts", credits(100), entitlement.Update{Alerts: alerts(make([]entitlement.Alert, entitlement.MaxAlerts+1)...)}, "alerts"},
		{"ExpiryPast", credits(100), entitlement.Update{ExpiresAt: &entitlement.Set[*time.Time]{To: new(now)}}, "expiresAt"},
		{"MetadataReservedKey", credits(100), entitlement.Update{Metadata: &entitlement.Set[map[string]string]{To: map[string]string{"__x__": "y"}}}, "metadata"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.e
			err := e.Apply(tt.u, now)
			if !isField(err, tt.wantField) {
				t.Fatalf("Apply = %v, want an error on field %q", err, tt.wantField)
			}
			if !e.Limits.IsZero() || len(e.Alerts) != 0 {
				t.Errorf("a refused Apply changed the entitlement: %+v %+v", e.Limits, e.Alerts)
			}
		})
	}
	t.Run("MetadataAndExpiry", func(t *testing.T) {
		exp := now.Add(time.Hour)
		e := limited(t, credits(100), entitlement.Update{
			Metadata:  &entitlement.Set[map[string]string]{To: map[string]string{"team": "blue"}},
			ExpiresAt: &entitlement.Set[*time.Time]{To: &exp},
		})
		if e.Metadata["team"] != "blue" || e.ExpiresAt == nil || !e.ExpiresAt.Equal(exp) {
			t.Fatalf("after Apply: metadata %v, expiresAt %v", e.Metadata, e.ExpiresAt)
		}
		e = limited(t, e, entitlement.Update{Metadata: &entitlement.Set[map[string]string]{}, ExpiresAt: &entitlement.Set[*time.Time]{}})
		if e.Metadata != nil || e.ExpiresAt != nil {
			t.Errorf("after clearing: metadata %v, expiresAt %v; want none", e.Metadata, e.ExpiresAt)
		}
	})
}

func TestEntitlement_Headroom(t *testing.T) {
	e := credits(1000)
	if got := e.Headroom(now); got != 1000 {
		t.Errorf("Headroom without controls = %d, want 1000 (the balance)", got)
	}
	e = limited(t, e, entitlement.Update{
		SpendLimit: daily(*usd(300), 0),
		Alerts:     &entitlement.Set[[]entitlement.Alert]{To: []entitlement.Alert{{Amount: usd(900)}, {Percent: new(int64(10))}}},
	})
	// The 900 threshold is the nearest boundary: 99 can be charged before
	// a charge crosses it.
	if got := e.Headroom(now); got != 99 {
		t.Errorf("Headroom with an alert at 900 = %d, want 99", got)
	}
	consume(t, &e, now, req(usd(150), 1)) // crosses 900: that alert is triggered now
	if got := e.Headroom(now); got != 150 {
		t.Errorf("Headroom with 150 of 300 spent = %d, want 150", got)
	}
	e.Authorize(now, holdReq(usd(100), 1, "h"), "h", "fp")
	if got := e.Headroom(now); got != 50 {
		t.Errorf("Headroom with 100 held = %d, want 50", got)
	}
	// The next day the limit is back, and the 10% alert (at 100) bounds it.
	if got := e.Headroom(now.Add(24 * time.Hour)); got != 300-100 {
		t.Errorf("Headroom the next day = %d, want 200", got)
	}
	q := quota(10, 0, now)
	if got := q.Headroom(now); got != 10 {
		t.Errorf("quota Headroom at its reset = %d, want 10", got)
	}
	sub := entitlement.Entitlement{Type: entitlement.TypeSubscription}
	if got := sub.Headroom(now); got != 0 {
		t.Errorf("subscription Headroom = %d, want 0", got)
	}
}
