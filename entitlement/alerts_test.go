package entitlement_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

func withAlerts(t *testing.T, e entitlement.Entitlement, as ...entitlement.Alert) entitlement.Entitlement {
	t.Helper()
	return limited(t, e, entitlement.Update{Alerts: &entitlement.Set[[]entitlement.Alert]{To: as}})
}

func TestEntitlement_Alerts(t *testing.T) {
	t.Run("OncePerCrossing", func(t *testing.T) {
		e := withAlerts(t, credits(1000), entitlement.Alert{Amount: usd(500)})
		steps := []struct {
			name     string
			cost     int64
			wantLow  bool
			wantTrig bool
		}{
			{"Above", 400, false, false},       // 600 left
			{"ToExactly", 100, true, true},     // 500 left: at the threshold is low
			{"FurtherBelow", 100, false, true}, // 400 left: no second event
		}
		for _, s := range steps {
			c, reason := consume(t, &e, now, req(usd(s.cost), 1))
			if reason != "" {
				t.Fatalf("%s: Consume(%d) = %q", s.name, s.cost, reason)
			}
			if c.LowBalance != s.wantLow || e.Alerts[0].Triggered != s.wantTrig {
				t.Errorf("%s: lowBalance %v, triggered %v; want %v, %v", s.name, c.LowBalance, e.Alerts[0].Triggered, s.wantLow, s.wantTrig)
			}
		}
		if at := e.Alerts[0].TriggeredAt; at == nil || !at.Equal(now) {
			t.Errorf("triggeredAt = %v, want %s", at, now)
		}
	})
	t.Run("RefundAboveArmsAgain", func(t *testing.T) {
		e := withAlerts(t, credits(1000), entitlement.Alert{Percent: new(int64(50))})
		c, _ := consume(t, &e, now, req(usd(600), 1))
		if !c.LowBalance {
			t.Fatal("a charge from 1000 to 400 did not cross 50% of 1000")
		}
		// Back to 450: still low, still triggered.
		if err := e.Refund(now, &c, entitlement.Amount{Cost: usd(50)}); err != nil {
			t.Fatal(err)
		}
		if !e.Alerts[0].Triggered {
			t.Fatal("a refund to 450 armed an alert at 500")
		}
		e.Credits.Balance.Cents += 100 // a top-up, to 550, which calls Refresh as every writer does
		e.Refresh(now)
		if e.Alerts[0].Triggered || e.Alerts[0].TriggeredAt != nil {
			t.Fatalf("after a top-up above the threshold: %+v, want armed", e.Alerts[0])
		}
		if c3, _ := consume(t, &e, now, req(usd(50), 1)); !c3.LowBalance {
			t.Error("the next crossing fired no event")
		}
	})
	t.Run("CaptureCrosses", func(t *testing.T) {
		e := withAlerts(t, credits(100), entitlement.Alert{Amount: usd(10)})
		h, _ := e.Authorize(now, holdReq(usd(95), 1, "h"), "h", "fp")
		if e.Alerts[0].Triggered {
			t.Fatal("a hold triggered an alert: only charges do")
		}
		c, ok := e.Capture(now, &h, entitlement.Charge{Cost: *usd(90), Units: 1}, "c")
		if !ok || !c.LowBalance {
			t.Errorf("capture to 10 left: ok %v, lowBalance %v; want true, true", ok, c.LowBalance)
		}
	})
	t.Run("QuotaResetArmsAgain", func(t *testing.T) {
		resetAt := now.Add(time.Hour)
		e := withAlerts(t, quota(10, 10, resetAt), entitlement.Alert{Units: new(int64(2))})
		if c, _ := consume(t, &e, now, req(nil, 8)); !c.LowBalance {
			t.Fatal("8 of 10 units did not cross 2 left")
		}
		if c, _ := consume(t, &e, resetAt, req(nil, 8)); !c.LowBalance {
			t.Error("after the quota reset, the next crossing fired no event")
		}
	})
	t.Run("SetWhileLow", func(t *testing.T) {
		e := withAlerts(t, credits(5), entitlement.Alert{Amount: usd(10)}, entitlement.Alert{Amount: usd(1)})
		if !e.Alerts[0].Triggered || e.Alerts[1].Triggered {
			t.Fatalf("alerts set at a balance of 5: %+v, want the 10 one triggered, the 1 one armed", e.Alerts)
		}
		c, _ := consume(t, &e, now, req(usd(1), 1))
		if c.LowBalance {
			t.Error("a charge from 5 to 4 fired an alert that started triggered")
		}
	})
	t.Run("OneChargeCrossesTwo", func(t *testing.T) {
		e := withAlerts(t, credits(100), entitlement.Alert{Amount: usd(50)}, entitlement.Alert{Amount: usd(20)})
		c, _ := consume(t, &e, now, req(usd(90), 1))
		if !c.LowBalance || !e.Alerts[0].Triggered || !e.Alerts[1].Triggered {
			t.Errorf("lowBalance %v, alerts %+v; want both triggered by one charge", c.LowBalance, e.Alerts)
		}
	})
	t.Run("CopiesShareNothing", func(t *testing.T) {
		e := withAlerts(t, credits(100), entitlement.Alert{Amount: usd(50)})
		before := e // a shallow copy, as stores make
		consume(t, &e, now, req(usd(60), 1))
		if before.Alerts[0].Triggered {
			t.Error("triggering an alert changed a shallow copy made before")
		}
	})
}

// TestEntitlement_PercentAlertOfGranted: a percentage alert is a
// percentage of what the entitlement was granted when it was made
// (credits.granted; a quota's limit), never of its balance at some later
// time: granted does not move when the balance does (charges, refunds, a
// partial refund of its payment), so neither does the threshold.
func TestEntitlement_PercentAlertOfGranted(t *testing.T) {
	e := withAlerts(t, credits(1000), entitlement.Alert{Percent: new(int64(50))}) // 50% of 1000: low at 500
	e.Credits.Balance.Cents = 600                                                 // a partial refund of its payment took 400, as the stores do
	e.Refresh(now)
	if c, _ := consume(t, &e, now, req(usd(99), 1)); c.LowBalance { // to 501
		t.Fatal("a charge to 501 crossed 50%: want the threshold at 500, half of granted 1000")
	}
	if c, _ := consume(t, &e, now, req(usd(1), 1)); !c.LowBalance || e.Credits.Granted.Cents != 1000 { // to 500
		t.Errorf("a charge to 500: lowBalance %v, granted %d; want the alert crossed, granted still 1000", c.LowBalance, e.Credits.Granted.Cents)
	}
	q := withAlerts(t, quota(10, 10, now.Add(time.Hour)), entitlement.Alert{Percent: new(int64(30))}) // low at 3 units left
	for i, want := range []bool{false, false, false, false, false, false, true} {
		r := req(nil, 1)
		r.IdempotencyKey = fmt.Sprint("q", i)
		if c, _ := consume(t, &q, now, r); c.LowBalance != want {
			t.Errorf("quota charge %d (to %d left): lowBalance %v, want %v (30%% of the limit 10 is 3)", i+1, q.Quota.Remaining, c.LowBalance, want)
		}
	}
}
