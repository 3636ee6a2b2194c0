package entitlement_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

// walletOf returns e owned by the wallet "w" (the callers of req are "a1").
func walletOf(e entitlement.Entitlement) entitlement.Entitlement {
	e.AgentID = "w"
	return e
}

// member returns a1's membership in "w" with caps, started at now.
func member(t *testing.T, caps entitlement.Limits) entitlement.Membership {
	t.Helper()
	m := entitlement.Membership{WalletID: "w", MemberID: "a1", Caps: caps}
	if err := m.Start(now); err != nil {
		t.Fatalf("Start: %v", err)
	}
	return m
}

func dailyCaps(max *money.Money, units int64) entitlement.Limits {
	l := entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, MaxUnits: units}}
	if max != nil {
		l.Spend.Max = *max
	}
	return l
}

func TestMembership_Validate(t *testing.T) {
	tests := []struct {
		name      string
		change    func(m *entitlement.Membership)
		wantField string
	}{
		{"Valid", func(m *entitlement.Membership) {}, ""},
		{"NoWallet", func(m *entitlement.Membership) { m.WalletID = "" }, "walletId"},
		{"NoMember", func(m *entitlement.Membership) { m.MemberID = "" }, "memberId"},
		{"MemberIsWallet", func(m *entitlement.Membership) { m.MemberID = "w" }, "memberId"},
		{"BadOrder", func(m *entitlement.Membership) { m.Order = "last" }, "order"},
		{"NegativeMaxPerCall", func(m *entitlement.Membership) { m.Caps.MaxPerCall = usd(-1) }, "caps.maxPerCall.cents"},
		{"ZeroMaxUnitsPerCall", func(m *entitlement.Membership) { m.Caps.MaxUnitsPerCall = int64p(0) }, "caps.maxUnitsPerCall"},
		{"MaxWithoutPeriod", func(m *entitlement.Membership) {
			m.Caps = entitlement.Limits{Spend: entitlement.SpendLimit{Max: *usd(5)}}
		}, "caps.spendLimit.period"},
		{"BadPeriod", func(m *entitlement.Membership) { m.Caps.Spend.Period = "year" }, "caps.spendLimit.period"},
		{"PeriodWithoutMax", func(m *entitlement.Membership) {
			m.Caps = entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay}}
		}, "caps.spendLimit.max"},
		{"NegativeMax", func(m *entitlement.Membership) { m.Caps.Spend.Max = *usd(-5) }, "caps.spendLimit.max.cents"},
		{"NegativeMaxUnits", func(m *entitlement.Membership) { m.Caps.Spend.MaxUnits = -1 }, "caps.spendLimit.maxUnits"},
		{"TwoCurrencies", func(m *entitlement.Membership) {
			m.Caps.MaxPerCall = &money.Money{Cents: 5, Currency: "EUR"}
		}, "caps.spendLimit.max.currency"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := entitlement.Membership{WalletID: "w", MemberID: "a1", Order: entitlement.OrderOwnFirst, Caps: dailyCaps(usd(500), 10)}
			tt.change(&m)
			err := m.Validate()
			var fe *field.Error
			switch {
			case tt.wantField == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantField != "" && (!errors.As(err, &fe) || fe.Field != tt.wantField):
				t.Errorf("Validate() = %v, want a field error on %s", err, tt.wantField)
			}
		})
	}
}

func TestMembership_Start(t *testing.T) {
	m := entitlement.Membership{WalletID: "w", MemberID: "a1", Caps: dailyCaps(usd(500), 0)}
	m.Caps.Spend.Spent = *usd(400) // counters given by a caller are ignored
	if err := m.Start(now); err != nil {
		t.Fatalf("Start: %v", err)
	}
	s := m.Caps.Spend
	if m.Order != entitlement.OrderOwnFirst || s.Spent != *usd(0) || !s.Anchor.Equal(now) || !s.ResetAt.Equal(now.Add(24*time.Hour)) {
		t.Errorf("Start = order %q, spend %+v; want own_first, 0 USD spent, anchored now, reset in a day", m.Order, s)
	}
	if !m.CreatedAt.Equal(now) || !m.UpdatedAt.Equal(now) {
		t.Errorf("Start instants = %s, %s; want %s", m.CreatedAt, m.UpdatedAt, now)
	}
}

func TestMembership_CheckAndCharge(t *testing.T) {
	e := walletOf(credits(10_000))
	m := member(t, entitlement.Limits{MaxPerCall: usd(300), Spend: dailyCaps(usd(500), 0).Spend})
	tests := []struct {
		cost *money.Money
		want string
	}{
		{usd(301), entitlement.LimitMaxPerCall},
		{&money.Money{Cents: 1, Currency: "EUR"}, entitlement.LimitCurrency},
		{nil, ""}, // the entitlement refuses it: cost_required
		{usd(300), ""},
	}
	for _, tt := range tests {
		if got := m.Check(now, &e, req(tt.cost, 1)); got != tt.want {
			t.Errorf("Check(%v) = %q, want %q", tt.cost, got, tt.want)
		}
	}
	c, reason := e.Consume(now, req(usd(300), 1), "c1", "fp")
	if reason != "" || c.WalletID != "w" || c.AgentID != "a1" {
		t.Fatalf("Consume on the wallet = %+v, %q; want a1's charge with walletId w", c, reason)
	}
	if changed, reached := m.Charge(now, &e, &c); !changed || reached {
		t.Errorf("Charge(300 of 500) = changed %v, reached %v; want true, false", changed, reached)
	}
	if got := m.Check(now, &e, req(usd(201), 1)); got != entitlement.LimitSpend {
		t.Errorf("Check(201) with 200 left = %q, want %q", got, entitlement.LimitSpend)
	}
	c2, _ := e.Consume(now, req(usd(200), 1), "c2", "fp")
	if _, reached := m.Charge(now, &e, &c2); !reached {
		t.Error("Charge(200) taking the spend to 500 = not reached, want reached")
	}
	if got := m.Check(now, &e, req(usd(1), 1)); got != entitlement.LimitSpend {
		t.Errorf("Check(1) at the cap = %q, want %q", got, entitlement.LimitSpend)
	}
	// The next day the period starts again.
	if got := m.Check(now.Add(24*time.Hour), &e, req(usd(300), 1)); got != "" {
		t.Errorf("Check(300) the next day = %q, want allowed", got)
	}
	if !m.Refresh(now.Add(24*time.Hour)) || m.Caps.Spend.Spent.Cents != 0 {
		t.Errorf("Refresh the next day: spent %v, want 0 and a change", m.Caps.Spend.Spent)
	}
}

func TestMembership_Units(t *testing.T) {
	e := walletOf(quota(100, 100, now.Add(time.Hour)))
	m := member(t, entitlement.Limits{MaxUnitsPerCall: int64p(5), Spend: dailyCaps(nil, 8).Spend})
	if got := m.Check(now, &e, req(nil, 6)); got != entitlement.LimitMaxUnitsPerCall {
		t.Errorf("Check(6 units) = %q, want %q", got, entitlement.LimitMaxUnitsPerCall)
	}
	c, _ := e.Consume(now, req(nil, 5), "c1", "fp")
	m.Charge(now, &e, &c)
	if got := m.Check(now, &e, req(nil, 4)); got != entitlement.LimitSpend {
		t.Errorf("Check(4 units) with 3 left = %q, want %q", got, entitlement.LimitSpend)
	}
	// Money caps do not bound a quota, units caps do not bound credits.
	cr := walletOf(credits(1000))
	if got := m.Check(now, &cr, req(usd(900), 1)); got != "" {
		t.Errorf("Check(credits) under units caps = %q, want allowed", got)
	}
	sub := walletOf(entitlement.Entitlement{Type: entitlement.TypeSubscription})
	if got := m.Check(now, &sub, req(nil, 50)); got != "" {
		t.Errorf("Check(subscription) = %q, want allowed", got)
	}
}

func TestMembership_Holds(t *testing.T) {
	e := walletOf(credits(10_000))
	m := member(t, dailyCaps(usd(500), 0))
	hr := holdReq(usd(400), 1, "h1")
	h, reason := e.Authorize(now, hr, "h1", "fp")
	if reason != "" || h.WalletID != "w" || e.Holds[0].MemberID != "a1" {
		t.Fatalf("Authorize on the wallet = %+v, %q, open %+v; want walletId w and memberId a1", h, reason, e.Holds)
	}
	if !m.Hold(now, &e, &h) {
		t.Fatal("Hold = unchanged, want recorded")
	}
	if got := m.Check(now, &e, req(usd(101), 1)); got != entitlement.LimitSpend {
		t.Errorf("Check(101) with 400 held of 500 = %q, want %q", got, entitlement.LimitSpend)
	}
	// An expired hold stops counting at once, with no write.
	if got := m.Check(h.ExpiresAt, &e, req(usd(500), 1)); got != "" {
		t.Errorf("Check(500) once the hold expired = %q, want allowed", got)
	}
	// A capture of 250 ends the hold and counts 250.
	c, ok := e.Capture(now, &h, entitlement.Charge{Cost: *usd(250), Units: 1}, "c1")
	if !ok || c.WalletID != "w" {
		t.Fatalf("Capture = %+v, %v; want a consumption with walletId w", c, ok)
	}
	m.EndHold(now, h.ID)
	m.Charge(now, &e, &c)
	if got := m.Check(now, &e, req(usd(250), 1)); got != "" {
		t.Errorf("Check(250) after a capture of 250 = %q, want allowed", got)
	}
	if got := m.Check(now, &e, req(usd(251), 1)); got != entitlement.LimitSpend {
		t.Errorf("Check(251) after a capture of 250 = %q, want %q", got, entitlement.LimitSpend)
	}
	// A refund in the period gives the spend back.
	if !m.Refund(now, &e, &c, entitlement.Charge{Cost: *usd(250)}) || m.Caps.Spend.Spent.Cents != 0 {
		t.Errorf("Refund: spent %v, want 0", m.Caps.Spend.Spent)
	}
	// A refund of an earlier period's charge gives nothing to this one.
	m2 := member(t, dailyCaps(usd(500), 0))
	next := now.Add(25 * time.Hour)
	c3, _ := e.Consume(next, req(usd(100), 1), "c3", "fp")
	m2.Charge(next, &e, &c3)
	if m2.Refund(next, &e, &c, entitlement.Charge{Cost: *usd(250)}); m2.Caps.Spend.Spent.Cents != 100 {
		t.Errorf("Refund of yesterday's charge: spent %v, want 100", m2.Caps.Spend.Spent)
	}
}

func TestMembership_HoldsPrunedAndEnded(t *testing.T) {
	e := walletOf(credits(10_000))
	m := member(t, dailyCaps(usd(500), 0))
	h, _ := e.Authorize(now, holdReq(usd(100), 1, "h1"), "h1", "fp")
	m.Hold(now, &e, &h)
	if !m.EndHold(now, "h1") || len(m.Holds) != 0 {
		t.Errorf("EndHold: holds %+v, want none", m.Holds)
	}
	m.Hold(now, &e, &h)
	if !m.Refresh(h.ExpiresAt) || m.Holds != nil {
		t.Errorf("Refresh at the expiry: holds %+v, want pruned", m.Holds)
	}
	// Without a period nothing is recorded.
	free := member(t, entitlement.Limits{MaxPerCall: usd(200)})
	if free.Hold(now, &e, &h) || free.Holds != nil {
		t.Errorf("Hold without a period: holds %+v, want none", free.Holds)
	}
}

func TestMembership_Apply(t *testing.T) {
	e := walletOf(credits(10_000))
	m := member(t, dailyCaps(usd(500), 0))
	c, _ := e.Consume(now, req(usd(300), 1), "c1", "fp")
	m.Charge(now, &e, &c)
	later := now.Add(time.Hour)
	caps := dailyCaps(usd(1000), 0)
	if err := m.Apply(nil, &caps, later); err != nil {
		t.Fatalf("Apply(a new max): %v", err)
	}
	if m.Caps.Spend.Spent.Cents != 300 || !m.Caps.Spend.Anchor.Equal(now) || !m.UpdatedAt.Equal(later) {
		t.Errorf("Apply(same period) = %+v, want the 300 spent and the anchor kept", m.Caps.Spend)
	}
	weekly := entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodWeek, Max: *usd(1000)}}
	wallet := entitlement.OrderWalletFirst
	if err := m.Apply(&wallet, &weekly, later); err != nil {
		t.Fatalf("Apply(a new period): %v", err)
	}
	if m.Caps.Spend.Spent.Cents != 0 || !m.Caps.Spend.Anchor.Equal(later) || m.Order != wallet {
		t.Errorf("Apply(new period) = %+v, order %q; want a new period at %s", m.Caps.Spend, m.Order, later)
	}
	bad := entitlement.Order("last")
	before := m.Clone()
	if err := m.Apply(&bad, nil, later); err == nil || m.Order != before.Order {
		t.Errorf("Apply(bad order) = %v, order %q; want an error and nothing changed", err, m.Order)
	}
	if err := m.Apply(nil, &entitlement.Limits{}, later); err != nil || !m.Caps.IsZero() {
		t.Errorf("Apply(no caps) = %v, caps %+v; want none", err, m.Caps)
	}
}
