package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// withControls returns e with u's spend controls and alerts applied at now,
// as a grant sets them.
func withControls(t *testing.T, e entitlement.Entitlement, u entitlement.Update, now time.Time) entitlement.Entitlement {
	t.Helper()
	if err := e.Apply(u, now); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return e
}

func dailySpend(cents int64) *entitlement.Set[entitlement.SpendLimit] {
	return &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usd(cents)}}
}

func alertsAt(as ...entitlement.Alert) *entitlement.Set[[]entitlement.Alert] {
	return &entitlement.Set[[]entitlement.Alert]{To: as}
}

// wantDeniedBy fails unless req is denied by entitlement id alone, for reason.
func wantDeniedBy(t *testing.T, s store.EntitlementStore, req entitlement.ConsumeRequest, id string, reason entitlement.Reason) {
	t.Helper()
	wantDenied(t, s, req, entitlement.Denial{EntitlementID: id, Reason: reason})
}

// dispatchAll marks every pending event dispatched.
func dispatchAll(t *testing.T, s store.EntitlementStore) {
	t.Helper()
	if err := s.MarkEventsDispatched(t.Context(), eventIDs(pendingEvents(t, s))); err != nil {
		t.Fatalf("MarkEventsDispatched: %v", err)
	}
}

var limitTests = []subtest{
	{"LimitsMaxPerCall", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		e := createEntitlement(t, s, withControls(t, credits(agent, 1000, clock.Now()),
			entitlement.Update{MaxPerCall: &entitlement.Set[*money.Money]{To: ptr(usd(50))}}, clock.Now()))
		if got := getEntitlement(t, s, e.ID).Limits.MaxPerCall; got == nil || *got != usd(50) {
			t.Fatalf("stored maxPerCall = %v, want 50 USD", got)
		}
		wantDeniedBy(t, s, request(agent, "k1", 51), e.ID, entitlement.ReasonMaxPerCall)
		if res := authorize(t, s, holdRequest(agent, "h1", 51)); res.Outcome != store.Denied || res.Denials[0].Reason != entitlement.ReasonMaxPerCall {
			t.Errorf("hold of 51 under maxPerCall 50 = %s %+v, want denied with %s", res.Outcome, res.Denials, entitlement.ReasonMaxPerCall)
		}
		mustConsume(t, s, request(agent, "k2", 50))

		q := quota(agent, 100, clock.Now())
		q.Scope.Service = "units"
		q = createEntitlement(t, s, withControls(t, q, entitlement.Update{MaxUnitsPerCall: &entitlement.Set[*int64]{To: ptr(int64(5))}}, clock.Now()))
		r := entitlement.ConsumeRequest{AgentID: agent, Service: "units", Tool: testTool, IdempotencyKey: "q1", Units: 6, EntitlementID: q.ID}
		wantDeniedBy(t, s, r, q.ID, entitlement.ReasonMaxPerCall)
	}},
	{"LimitsSpendPerPeriod", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		start := clock.Now()
		e := createEntitlement(t, s, withControls(t, credits(agent, 1000, start), entitlement.Update{SpendLimit: dailySpend(100)}, start))
		mustConsume(t, s, request(agent, "k1", 60))
		res := mustConsume(t, s, request(agent, "k2", 40))
		if got := res.Entitlement.Limits.Spend; got.Spent != usd(100) || !got.ResetAt.Equal(start.Add(24*time.Hour)) {
			t.Errorf("spend limit after 100 spent = %+v, want spent 100 USD, resetAt %s", got, start.Add(24*time.Hour))
		}
		wantDeniedBy(t, s, request(agent, "k3", 1), e.ID, entitlement.ReasonSpendLimit)
		if res, err := s.Check(t.Context(), request(agent, "k3", 1)); err != nil || res.Outcome != store.Denied {
			t.Errorf("Check of 1 with the day's 100 spent = %s, %v; want denied", res.Outcome, err)
		}
		clock.Advance(24 * time.Hour)
		if got := getEntitlement(t, s, e.ID).Limits.Spend.Spent; got != usd(0) {
			t.Errorf("spent shown the next day = %v, want 0 USD (the lazy reset)", got)
		}
		mustConsume(t, s, request(agent, "k4", 100))
		if got := getEntitlement(t, s, e.ID).Credits.Balance; got != usd(800) {
			t.Errorf("balance = %v, want 800 USD", got)
		}
	}},
	{"LimitsQuotaUnitsPerPeriod", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		q := createEntitlement(t, s, withControls(t, quota(agent, 100, clock.Now()), entitlement.Update{
			SpendLimit: &entitlement.Set[entitlement.SpendLimit]{To: entitlement.SpendLimit{Period: entitlement.PeriodHour, MaxUnits: 3}},
		}, clock.Now()))
		r := entitlement.ConsumeRequest{AgentID: agent, Service: testService, Tool: testTool, IdempotencyKey: "q1", Units: 3}
		mustConsume(t, s, r)
		r.IdempotencyKey, r.Units = "q2", 1
		wantDeniedBy(t, s, r, q.ID, entitlement.ReasonSpendLimit)
		clock.Advance(time.Hour)
		mustConsume(t, s, r)
		if got := getEntitlement(t, s, q.ID).Limits.Spend.SpentUnits; got != 1 {
			t.Errorf("spentUnits = %d, want 1", got)
		}
	}},
	{"LimitsHoldsAndRefunds", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		e := createEntitlement(t, s, withControls(t, credits(agent, 1000, clock.Now()), entitlement.Update{SpendLimit: dailySpend(100)}, clock.Now()))
		if res := authorize(t, s, holdRequest(agent, "big", 101)); res.Outcome != store.Denied || res.Denials[0].Reason != entitlement.ReasonSpendLimit {
			t.Fatalf("hold of 101 under 100/day = %s %+v, want denied with %s", res.Outcome, res.Denials, entitlement.ReasonSpendLimit)
		}
		h := mustAuthorize(t, s, holdRequest(agent, "h1", 60)).Hold
		wantDeniedBy(t, s, request(agent, "k1", 41), e.ID, entitlement.ReasonSpendLimit)
		c := mustCapture(t, s, h, entitlement.Amount{Cost: ptr(usd(30))}).Consumption
		if got := getEntitlement(t, s, e.ID).Limits.Spend.Spent; got != usd(30) {
			t.Errorf("spent after capturing 30 = %v, want 30 USD", got)
		}
		h2 := mustAuthorize(t, s, holdRequest(agent, "h2", 70)).Hold
		mustRelease(t, s, h2, store.Released)
		mustRefund(t, s, c.ID, entitlement.Amount{Cost: ptr(usd(20))}, false)
		if got := getEntitlement(t, s, e.ID).Limits.Spend.Spent; got != usd(10) {
			t.Errorf("spent after a release and a refund of 20 = %v, want 10 USD", got)
		}
		mustConsume(t, s, request(agent, "k2", 90))
	}},
	{"UpdateEntitlement", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		ctx := t.Context()
		_, err := s.UpdateEntitlement(ctx, "no-such-entitlement", entitlement.Update{})
		wantCode(t, "UpdateEntitlement(absent)", err, store.CodeNotFound)

		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		_, err = s.UpdateEntitlement(ctx, e.ID, entitlement.Update{MaxPerCall: &entitlement.Set[*money.Money]{To: &money.Money{Cents: 5, Currency: "EUR"}}})
		wantCode(t, "UpdateEntitlement(maxPerCall in EUR)", err, store.CodeInvalid)
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Field != "limits.maxPerCall.currency" {
			t.Errorf("UpdateEntitlement(maxPerCall in EUR): %v, want a field error on limits.maxPerCall.currency", err)
		}
		mustConsume(t, s, request(agent, "k1", 100)) // 900 left
		clock.Advance(time.Minute)
		exp := clock.Now().Add(48 * time.Hour)
		u := entitlement.Update{
			MaxPerCall: &entitlement.Set[*money.Money]{To: ptr(usd(200))},
			SpendLimit: dailySpend(300),
			Alerts:     alertsAt(entitlement.Alert{Amount: ptr(usd(950))}, entitlement.Alert{Percent: ptr(int64(50))}),
			Metadata:   &entitlement.Set[map[string]string]{To: map[string]string{"team": "blue"}},
			ExpiresAt:  &entitlement.Set[*time.Time]{To: &exp},
		}
		got, err := s.UpdateEntitlement(ctx, e.ID, u)
		if err != nil {
			t.Fatalf("UpdateEntitlement: %v", err)
		}
		want := e
		if err := want.Apply(u, clock.Now()); err != nil {
			t.Fatal(err)
		}
		want.Credits.Balance = usd(900)
		want.Alerts[0].Triggered, want.Alerts[0].TriggeredAt = true, ptr(clock.Now()) // 900 is below 950 already: no event
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("UpdateEntitlement answer (-want +got):\n%s", d)
		}
		if d := cmpDiff(got, getEntitlement(t, s, e.ID)); d != "" {
			t.Errorf("GetEntitlement after UpdateEntitlement (-answer +stored):\n%s", d)
		}
		again, err := s.UpdateEntitlement(ctx, e.ID, entitlement.Update{Metadata: u.Metadata})
		if err != nil {
			t.Fatalf("UpdateEntitlement (metadata again): %v", err)
		}
		if d := cmpDiff(got, again); d != "" {
			t.Errorf("a repeated update changed the entitlement (-first +second):\n%s", d)
		}
		wantDeniedBy(t, s, request(agent, "k2", 201), e.ID, entitlement.ReasonMaxPerCall)
		// Removing: a Set of nothing.
		cleared, err := s.UpdateEntitlement(ctx, e.ID, entitlement.Update{
			MaxPerCall: &entitlement.Set[*money.Money]{}, SpendLimit: &entitlement.Set[entitlement.SpendLimit]{},
			Alerts: alertsAt(), Metadata: &entitlement.Set[map[string]string]{}, ExpiresAt: &entitlement.Set[*time.Time]{},
		})
		if err != nil || !cleared.Limits.IsZero() || len(cleared.Alerts) != 0 || len(cleared.Metadata) != 0 || cleared.ExpiresAt != nil {
			t.Errorf("UpdateEntitlement(remove all) = %+v, %v; want no limits, alerts, metadata or expiry", cleared, err)
		}
		mustConsume(t, s, request(agent, "k3", 201))
	}},
	{"AlertsBalanceLow", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		e := createEntitlement(t, s, withControls(t, credits(agent, 1000, clock.Now()),
			entitlement.Update{Alerts: alertsAt(entitlement.Alert{Amount: ptr(usd(500))})}, clock.Now()))
		dispatchAll(t, s)
		mustConsume(t, s, request(agent, "k1", 400))
		if evs := pendingEventsOf(t, s, event.EntitlementBalanceLow); len(evs) != 0 {
			t.Fatalf("after a charge that left 600: %d balance_low events, want none", len(evs))
		}
		c := mustConsume(t, s, request(agent, "k2", 100)).Consumption  // 500 left: low
		c3 := mustConsume(t, s, request(agent, "k3", 100)).Consumption // 400: no second event
		evs := pendingEventsOf(t, s, event.EntitlementBalanceLow)
		if len(evs) != 1 {
			t.Fatalf("after crossing once: %d balance_low events, want 1", len(evs))
		}
		data := eventData(t, evs[0])
		alerts, _ := data["alerts"].([]any)
		if data["id"] != e.ID || len(alerts) != 1 || alerts[0].(map[string]any)["triggered"] != true {
			t.Errorf("balance_low data = %s, want entitlement %s with its alert triggered", evs[0].Data, e.ID)
		}
		if evs[0].AgentID != agent {
			t.Errorf("balance_low agentId = %q, want %q", evs[0].AgentID, agent)
		}
		dispatchAll(t, s)
		// A refund above the threshold arms it again; the next crossing, by a capture, fires again.
		mustRefund(t, s, c.ID, entitlement.Amount{}, false) // 500: still low
		if got := getEntitlement(t, s, e.ID).Alerts[0]; !got.Triggered {
			t.Fatalf("after a refund to 500: alert %+v, want still triggered", got)
		}
		mustRefund(t, s, c3.ID, entitlement.Amount{}, false) // 600: armed
		if got := getEntitlement(t, s, e.ID).Alerts[0]; got.Triggered || got.TriggeredAt != nil {
			t.Fatalf("after a refund to 600: alert %+v, want armed", got)
		}
		h := mustAuthorize(t, s, holdRequest(agent, "h1", 150)).Hold
		if evs := pendingEventsOf(t, s, event.EntitlementBalanceLow); len(evs) != 0 {
			t.Fatalf("a hold wrote %d balance_low events, want none", len(evs))
		}
		mustCapture(t, s, h, entitlement.Amount{}) // 450
		if evs := pendingEventsOf(t, s, event.EntitlementBalanceLow); len(evs) != 1 {
			t.Errorf("after a capture crossing again: %d balance_low events, want 1", len(evs))
		}
	}},
}

var accountLimitTests = []subtest{
	{"AccountMaxPerCall", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		ctx := t.Context()
		agent := newAgent()
		_, err := s.SetAccountLimits(ctx, agent, entitlement.AccountLimits{MaxPerCall: []money.Money{usd(30), usd(40)}})
		wantCode(t, "SetAccountLimits(two USD amounts)", err, store.CodeInvalid)
		var fe *field.Error
		if !errors.As(err, &fe) || fe.Field != "maxPerCall[1].currency" {
			t.Errorf("SetAccountLimits(two USD amounts): %v, want a field error on maxPerCall[1].currency", err)
		}
		l := entitlement.AccountLimits{MaxPerCall: []money.Money{usd(30), {Cents: 5, Currency: "EUR"}}, MaxUnitsPerCall: ptr(int64(5))}
		a, err := s.SetAccountLimits(ctx, agent, l) // creates the account
		if err != nil {
			t.Fatalf("SetAccountLimits: %v", err)
		}
		if d := cmpDiff(l, a.Limits); d != "" {
			t.Errorf("SetAccountLimits answer (-want +got):\n%s", d)
		}
		if _, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: agent, DisplayName: "A"}); err != nil {
			t.Fatalf("UpsertAccount: %v", err)
		}
		got, err := s.GetAccount(ctx, agent)
		if err != nil || cmpDiff(l, got.Limits) != "" || got.DisplayName != "A" {
			t.Errorf("GetAccount after UpsertAccount = %+v, %v; want the limits kept", got, err)
		}
		createEntitlement(t, s, credits(agent, 1000, clock.Now()))
		refused := entitlement.Denial{Reason: entitlement.ReasonMaxPerCall}
		wantDenied(t, s, request(agent, "k1", 31), refused)
		if res, err := s.Check(ctx, request(agent, "k1", 31)); err != nil || res.Outcome != store.Denied || len(res.Denials) != 1 || res.Denials[0] != refused {
			t.Errorf("Check(31 under an account cap of 30) = %s %+v, %v; want denied by the account", res.Outcome, res.Denials, err)
		}
		if res := authorize(t, s, holdRequest(agent, "h1", 31)); res.Outcome != store.Denied || len(res.Denials) != 1 || res.Denials[0] != refused {
			t.Errorf("Authorize(31 under an account cap of 30) = %s %+v; want denied by the account", res.Outcome, res.Denials)
		}
		r := request(agent, "k2", 30)
		r.Units = 6
		wantDenied(t, s, r, refused)
		r.Units = 5
		first := mustConsume(t, s, r)
		// A used key replays, whatever the limits say now.
		if _, err := s.SetAccountLimits(ctx, agent, entitlement.AccountLimits{MaxPerCall: []money.Money{usd(10)}}); err != nil {
			t.Fatalf("SetAccountLimits(10): %v", err)
		}
		if res := checkAndConsume(t, s, r); res.Outcome != store.Replay || res.Consumption.ID != first.Consumption.ID {
			t.Errorf("replay after lowering the cap = %s, want a replay of %s", res.Outcome, first.Consumption.ID)
		}
		wantDenied(t, s, request(agent, "k3", 11), refused)
		if _, err := s.SetAccountLimits(ctx, agent, entitlement.AccountLimits{}); err != nil {
			t.Fatalf("SetAccountLimits(none): %v", err)
		}
		mustConsume(t, s, request(agent, "k3", 11))
	}},
}
