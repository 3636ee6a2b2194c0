package payment_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

func TestStatus_Toward(t *testing.T) {
	P, S, F, R := payment.StatusPending, payment.StatusSucceeded, payment.StatusFailed, payment.StatusRefunded
	for _, tt := range []struct {
		from, to payment.Status
		want     payment.Move
	}{
		{P, S, payment.Apply}, {P, F, payment.Apply}, {P, R, payment.Refuse},
		{S, S, payment.Replay}, {S, F, payment.Refuse}, {S, R, payment.Apply},
		{F, S, payment.Refuse}, {F, F, payment.Replay}, {F, R, payment.Refuse},
		{R, S, payment.Replay}, {R, F, payment.Refuse}, {R, R, payment.Replay},
	} {
		if got := tt.from.Toward(tt.to); got != tt.want {
			t.Errorf("%s.Toward(%s) = %d, want %d", tt.from, tt.to, got, tt.want)
		}
	}
}

func TestStatus_CanBecome(t *testing.T) {
	allowed := map[[2]payment.Status]bool{
		{payment.StatusPending, payment.StatusSucceeded}:  true,
		{payment.StatusPending, payment.StatusFailed}:     true,
		{payment.StatusSucceeded, payment.StatusRefunded}: true,
	}
	all := []payment.Status{payment.StatusPending, payment.StatusSucceeded, payment.StatusFailed, payment.StatusRefunded}
	for _, from := range all {
		for _, to := range all {
			if got, want := from.CanBecome(to), allowed[[2]payment.Status{from, to}]; got != want {
				t.Errorf("%s.CanBecome(%s) = %v, want %v", from, to, got, want)
			}
		}
	}
}

func TestGrant_Entitlement(t *testing.T) {
	now := time.Date(2026, 1, 31, 10, 0, 0, 0, time.UTC)
	until := now.AddDate(0, 1, 0)
	p := &payment.Payment{ID: "p1", AgentID: "a1", Amount: money.Money{Cents: 2500, Currency: "USD"}}
	scope := entitlement.Scope{Service: "search"}

	c := payment.Grant{Type: entitlement.TypeCredits, Scope: scope}.Entitlement("e1", p, now)
	if c.Credits.Balance != p.Amount || c.Credits.Granted != p.Amount || c.PaymentID != "p1" || c.Status != entitlement.StatusActive {
		t.Errorf("credits grant = %+v, want balance and granted %v from payment p1, active", c, p.Amount)
	}

	q := payment.Grant{Type: entitlement.TypeQuota, Scope: scope, Limit: 100, Period: entitlement.PeriodMonth}.Entitlement("e2", p, now)
	if want := time.Date(2026, 2, 28, 10, 0, 0, 0, time.UTC); q.Quota.Remaining != 100 || !q.Quota.ResetAt.Equal(want) || !q.Quota.Anchor.Equal(now) {
		t.Errorf("quota grant = %+v, want 100 remaining, reset at %s, anchored at %s", q.Quota, want, now)
	}

	s := payment.Grant{Type: entitlement.TypeSubscription, Scope: scope, ValidUntil: &until}.Entitlement("e3", p, now)
	if !s.Subscription.ValidFrom.Equal(now) || !s.Subscription.ValidUntil.Equal(until) {
		t.Errorf("subscription grant = %+v, want [%s, %s)", s.Subscription, now, until)
	}
}
