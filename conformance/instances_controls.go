package conformance

import (
	"fmt"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// instancesAlert drains a credits entitlement with a low-balance alert
// across the instances: the alert fires exactly once, on the charge that
// took the exact balance to or below its threshold (with leases, that
// charge is made on the entitlement after a gather: no lease spans the
// threshold).
func instancesAlert(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
	const affordable, cents, threshold = 60, 5, 100
	agent := newAgent()
	e := createEntitlement(t, ss[0], withControls(t, credits(agent, affordable*cents, clock.Now()),
		entitlement.Update{Alerts: alertsAt(entitlement.Alert{Amount: ptr(usd(threshold))})}, clock.Now()))
	results := consumeOn(t, ss, agent, 4, 8, cents, false)
	if consumed := countOutcome(results, store.Consumed); consumed != affordable {
		t.Errorf("%d calls consumed, want every affordable one: %d", consumed, affordable)
	}
	evs := pendingEventsOf(t, ss[0], event.EntitlementBalanceLow)
	if len(evs) != 1 {
		t.Fatalf("%d entitlement.balance_low events, want exactly 1", len(evs))
	}
	data := eventData(t, evs[0])
	if data["id"] != e.ID {
		t.Errorf("balance_low data = %s, want entitlement %s", evs[0].Data, e.ID)
	}
	if got := depletedEvents(t, ss[0], e.ID); got != 1 {
		t.Errorf("%d entitlement.depleted events, want exactly 1", got)
	}
	wantExact(t, ss, agent, e.ID, 0)
	return e.ID
}

// instancesSpendLimit charges a credits entitlement with a daily spend
// limit from every instance at once, with more calls than the limit allows:
// exactly the limit is charged, and every other call is denied by it.
func instancesSpendLimit(t *testing.T, ss []store.EntitlementStore, clock *Clock, _ InstanceOptions) string {
	const limit, cents, initial = 100, 5, 1000
	agent := newAgent()
	e := createEntitlement(t, ss[0], withControls(t, credits(agent, initial, clock.Now()),
		entitlement.Update{SpendLimit: dailySpend(limit)}, clock.Now()))
	results := consumeOn(t, ss, agent, 4, 8, cents, false)
	if consumed := countConsumed(t, results, entitlement.ReasonSpendLimit); consumed != limit/cents {
		t.Errorf("%d calls consumed, want the limit's %d", consumed, limit/cents)
	}
	if total, _ := storedCharges(t, ss[0], agent); total != limit {
		t.Errorf("stored charges total %d cents, want the limit, %d", total, limit)
	}
	for i, s := range ss {
		got := getEntitlement(t, s, e.ID)
		if left(got) != initial-limit || got.Limits.Spend.Spent != usd(limit) {
			t.Errorf("instance %d: %d left, %v spent this period; want %d left and the limit, %d, spent", i, left(got), got.Limits.Spend.Spent, initial-limit, limit)
		}
		wantDeniedBy(t, s, request(agent, fmt.Sprint("after-", i), 1), e.ID, entitlement.ReasonSpendLimit)
	}
	return e.ID
}

// instancesRefundAndDispute refunds part of a paid credits grant on one
// instance while every instance holds back part of it (where a store
// leases: a lease each, which together reserve most of the grant), then
// disputes its payment on another: the part comes off exactly, what is left
// is read alike on every instance, and once the dispute has revoked the
// grant no instance charges it again.
func instancesRefundAndDispute(t *testing.T, ss []store.EntitlementStore, _ *Clock, opts InstanceOptions) string {
	const initial, part, cents = 100, 50, 5
	agent := newAgent()
	p, id := succeeded(t, ss[0], agent, "instances", initial)
	if opts.Reserve != nil {
		for _, s := range ss {
			opts.Reserve(t, s, id)
		}
	}
	refundPart(t, ss[1], p.ID, part, signing)
	wantExact(t, ss, agent, id, initial-part)
	if _, err := ss[2].DisputePayment(t.Context(), p.ID, store.PaymentChange{Reason: "fraudulent"}); err != nil {
		t.Fatalf("DisputePayment: %v", err)
	}
	for i, s := range ss {
		if e := getEntitlement(t, s, id); e.Status != entitlement.StatusRevoked || left(e) != initial-part {
			t.Errorf("instance %d: %s with %d left, want revoked with %d", i, e.Status, left(e), initial-part)
		}
		if res := checkAndConsume(t, s, request(agent, fmt.Sprint("after-dispute-", i), cents)); res.Outcome != store.Denied {
			t.Errorf("instance %d: a call after the dispute = %s %v, want denied (the grant is revoked)", i, res.Outcome, res.Denials)
		}
	}
	if charged, n := storedCharges(t, ss[0], agent); n != 0 {
		t.Errorf("%d consumptions (%d cents) stored, want none: the grant was only refunded and disputed", n, charged)
	}
	return id
}
