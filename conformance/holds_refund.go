package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// mustRefund refunds a of consumption id and fails the test on an error or
// a result whose Replayed is not replayed.
func mustRefund(t *testing.T, s store.EntitlementStore, id string, a entitlement.Amount, replayed bool) store.RefundResult {
	t.Helper()
	res, err := s.RefundConsumption(t.Context(), id, a)
	if err != nil || res.Replayed != replayed || res.Consumption.Refund == nil {
		t.Fatalf("RefundConsumption(%s) = replayed %v, refund %+v, %v; want replayed %v with the refund", id, res.Replayed, res.Consumption.Refund, err, replayed)
	}
	return res
}

var refundTests = []subtest{
	{"RefundAll", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		c := mustConsume(t, s, request(agent, "c", 250)).Consumption
		if err := s.MarkEventsDispatched(t.Context(), eventIDs(pendingEvents(t, s))); err != nil {
			t.Fatalf("MarkEventsDispatched: %v", err)
		}
		now := clock.Advance(time.Second)
		res := mustRefund(t, s, c.ID, entitlement.Amount{}, false)
		want := c
		want.Refund = &entitlement.Refund{Charge: entitlement.Charge{Cost: usd(250)}, RefundedAt: now}
		if d := cmpDiff(want, res.Consumption); d != "" {
			t.Errorf("RefundConsumption consumption (-want +got):\n%s", d)
		}
		if res.Entitlement.ID != e.ID || res.Entitlement.Credits.Balance != usd(1000) {
			t.Errorf("RefundConsumption entitlement = %s with %v, want %s with 1000 USD", res.Entitlement.ID, res.Entitlement.Credits.Balance, e.ID)
		}
		got, err := s.GetConsumption(t.Context(), c.ID)
		if err != nil {
			t.Fatalf("GetConsumption: %v", err)
		}
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("GetConsumption after the refund (-want +got):\n%s", d)
		}
		if d := cmpDiff([]entitlement.Consumption{want}, listAllConsumptions(t, s, agent, time.Time{})); d != "" {
			t.Errorf("ListConsumptions after the refund (-want +got):\n%s", d)
		}
		wantHeld(t, s, e.ID, 0, 1000)
		evs := wantEventTypes(t, s, event.ConsumptionRefunded)
		if len(evs) == 1 {
			data := eventData(t, evs[0])
			refund, _ := data["refund"].(map[string]any)
			cost, _ := refund["cost"].(map[string]any)
			if data["id"] != c.ID || cost["cents"] != float64(250) || evs[0].AgentID != agent {
				t.Errorf("consumption.refunded event = agent %q, data %v; want agent %s, the consumption %s with a refund of 250 cents", evs[0].AgentID, data, agent, c.ID)
			}
		}
	}},
	{"RefundPart", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		c := mustConsume(t, s, request(agent, "c", 250)).Consumption
		res := mustRefund(t, s, c.ID, entitlement.Amount{Cost: ptr(usd(100))}, false)
		if got := res.Consumption.Refund.Cost; got != usd(100) {
			t.Errorf("refund cost = %v, want 100 USD", got)
		}
		wantHeld(t, s, e.ID, 0, 850)
	}},
	{"RefundInvalid", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		c := mustConsume(t, s, request(agent, "c", 250)).Consumption
		for _, tc := range append([]amountCase{
			{"more than charged", "cost.cents", entitlement.Amount{Cost: ptr(usd(251))}},
			{"nothing", "cost.cents", entitlement.Amount{Cost: ptr(usd(0))}},
		}, foreignOrNegative...) {
			_, err := s.RefundConsumption(t.Context(), c.ID, tc.a)
			wantField(t, "RefundConsumption("+tc.name+")", err, store.CodeInvalid, tc.field)
		}
		wantHeld(t, s, e.ID, 0, 750)
		_, err := s.RefundConsumption(t.Context(), "no-such-consumption", entitlement.Amount{})
		wantCode(t, "RefundConsumption(unknown)", err, store.CodeNotFound)
		_, err = s.GetConsumption(t.Context(), "no-such-consumption")
		wantCode(t, "GetConsumption(unknown)", err, store.CodeNotFound)
	}},
	{"RefundReplay", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		c := mustConsume(t, s, request(agent, "c", 250)).Consumption
		amount := entitlement.Amount{Cost: ptr(usd(100))}
		first := mustRefund(t, s, c.ID, amount, false)
		clock.Advance(time.Second)
		again := mustRefund(t, s, c.ID, amount, true)
		if d := cmpDiff(first.Consumption, again.Consumption); d != "" {
			t.Errorf("replayed refund consumption (-first +replay):\n%s", d)
		}
		for name, a := range map[string]entitlement.Amount{"another amount": {Cost: ptr(usd(50))}, "no amount (all)": {}} {
			_, err := s.RefundConsumption(t.Context(), c.ID, a)
			wantConflictOf(t, "RefundConsumption("+name+") after a refund", err, entitlement.ErrRefundRefused)
		}
		wantHeld(t, s, e.ID, 0, 850)
		if n := len(pendingEventsOf(t, s, event.ConsumptionRefunded)); n != 1 {
			t.Errorf("%d consumption.refunded events, want 1", n)
		}
	}},
	{"RefundRevoked", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		c := mustConsume(t, s, request(agent, "c", 250)).Consumption
		revoke(t, s, e.ID)
		_, err := s.RefundConsumption(t.Context(), c.ID, entitlement.Amount{})
		wantConflictOf(t, "RefundConsumption(revoked entitlement)", err, entitlement.ErrRefundRefused)
		wantHeld(t, s, e.ID, 0, 750)
		if got, err := s.GetConsumption(t.Context(), c.ID); err != nil || got.Refund != nil {
			t.Errorf("GetConsumption after a refused refund = refund %+v, %v; want none", got.Refund, err)
		}
	}},
	{"RefundQuotaSamePeriod", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, q := agentWithQuota(t, s, 5, clock.Now())
		c1 := mustConsume(t, s, unitsRequest(agent, "c1", 3)).Consumption
		res := mustRefund(t, s, c1.ID, entitlement.Amount{Units: ptr[int64](2)}, false)
		if got := res.Consumption.Refund.Charge; got != (entitlement.Charge{Units: 2}) {
			t.Errorf("quota refund = %+v, want 2 units", got)
		}
		wantHeld(t, s, q.ID, 0, 4)
		one := request(agent, "c2", 0)
		one.Cost = nil
		c2 := mustConsume(t, s, one).Consumption
		clock.Set(q.Quota.ResetAt)
		_, err := s.RefundConsumption(t.Context(), c2.ID, entitlement.Amount{})
		wantConflictOf(t, "RefundConsumption(a quota call of the last period)", err, entitlement.ErrRefundRefused)
		wantHeld(t, s, q.ID, 0, 5)
	}},
	{"RefundCapture", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 1000, clock.Now())
		h := mustAuthorize(t, s, holdRequest(agent, "h", 300)).Hold
		c := mustCapture(t, s, h, entitlement.Amount{Cost: ptr(usd(200))}).Consumption
		res := mustRefund(t, s, c.ID, entitlement.Amount{}, false)
		if got := res.Consumption; got.Refund.Cost != usd(200) || got.HoldID != h.ID {
			t.Errorf("refund of a capture = %+v (holdId %q), want 200 USD back on hold %s", got.Refund, got.HoldID, h.ID)
		}
		wantHeld(t, s, e.ID, 0, 1000)
		wantHoldStatus(t, s, h.ID, entitlement.HoldCaptured, clock.Now())
	}},
}

// pendingEventsOf returns the pending events of type typ.
func pendingEventsOf(t *testing.T, s store.EntitlementStore, typ event.Type) []event.Event {
	t.Helper()
	var out []event.Event
	for _, e := range pendingEvents(t, s) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}
