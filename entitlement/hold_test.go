package entitlement_test

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
)

func holdReq(cost *money.Money, units int64, key string) *entitlement.HoldRequest {
	r := &entitlement.HoldRequest{ConsumeRequest: *req(cost, units)}
	r.IdempotencyKey = key
	if err := r.Normalize(); err != nil {
		panic(err)
	}
	return r
}

func int64p(n int64) *int64 { return &n }

func TestEntitlement_Authorize(t *testing.T) {
	t.Run("ReservesWhatIsAvailable", func(t *testing.T) {
		e := credits(100)
		h, reason := e.Authorize(now, holdReq(usd(70), 1, "h1"), "h1", "fp")
		if reason != "" {
			t.Fatalf("Authorize(70 of 100) = %q, want a hold", reason)
		}
		if h.Status != entitlement.HoldOpen || h.MaxCost != *usd(70) || !h.ExpiresAt.Equal(now.Add(entitlement.DefaultHoldTTL)) {
			t.Errorf("hold = %+v, want open, maxCost 70, default TTL", h)
		}
		if e.Credits.Balance.Cents != 100 || e.Credits.Held.Cents != 70 {
			t.Errorf("balance %d held %d, want 100 and 70", e.Credits.Balance.Cents, e.Credits.Held.Cents)
		}
		// 30 is available: a consume of 31 and a hold of 31 are refused.
		if _, reason := e.Consume(now, req(usd(31), 1), "c", ""); reason != entitlement.ReasonInsufficientBalance {
			t.Errorf("Consume(31) with 30 available = %q, want insufficient_balance", reason)
		}
		if _, reason := e.Authorize(now, holdReq(usd(31), 1, "h2"), "h2", ""); reason != entitlement.ReasonInsufficientBalance {
			t.Errorf("Authorize(31) with 30 available = %q, want insufficient_balance", reason)
		}
		if _, reason := e.Consume(now, req(usd(30), 1), "c", ""); reason != "" {
			t.Errorf("Consume(30) with 30 available = %q, want consumed", reason)
		}
	})
	t.Run("Quota", func(t *testing.T) {
		e := quota(5, 5, now.Add(time.Hour))
		if _, reason := e.Authorize(now, holdReq(nil, 4, "h1"), "h1", ""); reason != "" {
			t.Fatalf("Authorize(4 of 5) = %q", reason)
		}
		if _, reason := e.Consume(now, req(nil, 2), "c", ""); reason != entitlement.ReasonQuotaExhausted {
			t.Errorf("Consume(2) with 1 available = %q, want quota_exhausted", reason)
		}
		if e.Quota.Held != 4 || e.Quota.Remaining != 5 {
			t.Errorf("quota held %d remaining %d, want 4 and 5", e.Quota.Held, e.Quota.Remaining)
		}
	})
	t.Run("TooManyHolds", func(t *testing.T) {
		e := quota(1_000_000, 1_000_000, now.Add(time.Hour))
		for i := range entitlement.MaxOpenHolds {
			id := string(rune('a'+i%26)) + time.Duration(i).String()
			if _, reason := e.Authorize(now, holdReq(nil, 1, id), id, ""); reason != "" {
				t.Fatalf("hold %d: %q", i, reason)
			}
		}
		if _, reason := e.Authorize(now, holdReq(nil, 1, "one-more"), "one-more", ""); reason != entitlement.ReasonTooManyHolds {
			t.Errorf("hold %d = %q, want too_many_holds", entitlement.MaxOpenHolds+1, reason)
		}
	})
}

func TestHoldRequest_Normalize(t *testing.T) {
	tests := []struct {
		name      string
		r         entitlement.HoldRequest
		wantField string
	}{
		{"NegativeMax", entitlement.HoldRequest{ConsumeRequest: *req(usd(-1), 1)}, "maxCost.cents"},
		{"BadCurrency", entitlement.HoldRequest{ConsumeRequest: *req(&money.Money{Cents: 1, Currency: "usd"}, 1)}, "maxCost.currency"},
		{"Units", entitlement.HoldRequest{ConsumeRequest: *req(nil, entitlement.MaxUnits+1)}, "maxUnits"},
		{"TTLTooLong", entitlement.HoldRequest{ConsumeRequest: *req(usd(1), 1), TTL: entitlement.MaxHoldTTL + time.Second}, "ttlSeconds"},
		{"TTLTooShort", entitlement.HoldRequest{ConsumeRequest: *req(usd(1), 1), TTL: time.Millisecond}, "ttlSeconds"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.r.Normalize()
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Errorf("Normalize() = %v, want a field error naming %s", err, tt.wantField)
			}
		})
	}
	r := entitlement.HoldRequest{ConsumeRequest: *req(usd(1), 1)}
	c := r.ConsumeRequest
	if err := r.Normalize(); err != nil || r.TTL != entitlement.DefaultHoldTTL {
		t.Errorf("Normalize() = %v, TTL %v; want nil, %v", err, r.TTL, entitlement.DefaultHoldTTL)
	}
	if r.Fingerprint() == c.Fingerprint() {
		t.Error("a hold request's fingerprint equals the consume request's: one key could be both")
	}
}

func TestEntitlement_Capture(t *testing.T) {
	e := credits(100)
	h, _ := e.Authorize(now, holdReq(usd(70), 1, "h1"), "h1", "fp")
	if _, err := h.Settle(entitlement.Amount{Cost: usd(71)}); !isField(err, "cost.cents") {
		t.Errorf("Settle(71 of 70) = %v, want a cost.cents error", err)
	}
	if _, err := h.Settle(entitlement.Amount{Cost: &money.Money{Cents: 1, Currency: "EUR"}}); !isField(err, "cost.currency") {
		t.Errorf("Settle(EUR) = %v, want a cost.currency error", err)
	}
	if _, err := h.Settle(entitlement.Amount{Units: int64p(-1)}); !isField(err, "units") {
		t.Errorf("Settle(units -1) = %v, want a units error", err)
	}
	ch, err := h.Settle(entitlement.Amount{Cost: usd(25)})
	if err != nil {
		t.Fatal(err)
	}
	c, ok := e.Capture(now.Add(time.Second), &h, ch, "c1")
	if !ok {
		t.Fatal("Capture of an open hold refused")
	}
	if e.Credits.Balance.Cents != 75 || e.Credits.Held.Cents != 0 || c.Cost != *usd(25) || c.BalanceAfter != *usd(75) || c.HoldID != "h1" {
		t.Errorf("after capture of 25: balance %d held %d, consumption %+v", e.Credits.Balance.Cents, e.Credits.Held.Cents, c)
	}
	if h.Status != entitlement.HoldCaptured || h.Captured == nil || h.Captured.Cost != *usd(25) || h.ConsumptionID != "c1" {
		t.Errorf("hold after capture = %+v", h)
	}
	if _, ok := e.Capture(now, &h, ch, "c2"); ok {
		t.Error("a second Capture of the same hold charged again")
	}
	if e.Release(now, &h) {
		t.Error("Release after Capture released")
	}
}

func TestEntitlement_ExpireAndRelease(t *testing.T) {
	e := credits(100)
	h1, _ := e.Authorize(now, holdReq(usd(10), 1, "h1"), "h1", "")
	h2, _ := e.Authorize(now, &entitlement.HoldRequest{ConsumeRequest: *req(usd(20), 1), TTL: time.Hour}, "h2", "")
	later := now.Add(entitlement.DefaultHoldTTL)
	// A read past h1's expiry shows only h2 held; the next transaction ends h1.
	e.Refresh(later)
	if e.Credits.Held.Cents != 20 {
		t.Errorf("held at h1's expiry = %d, want 20", e.Credits.Held.Cents)
	}
	if _, ok := e.Capture(later, &h1, entitlement.Charge{Cost: *usd(1), Units: 1}, "c"); ok {
		t.Error("Capture at the hold's expiry succeeded")
	}
	if ids := e.ExpireHolds(later); len(ids) != 1 || ids[0] != "h1" {
		t.Errorf("ExpireHolds = %v, want [h1]", ids)
	}
	if ids := e.ExpireHolds(later); len(ids) != 0 {
		t.Errorf("second ExpireHolds = %v, want none: a hold expires once", ids)
	}
	if !e.Release(later, &h2) || h2.Status != entitlement.HoldReleased || e.Credits.Held.Cents != 0 || e.Credits.Balance.Cents != 100 {
		t.Errorf("Release(h2): hold %+v, held %d, balance %d", h2, e.Credits.Held.Cents, e.Credits.Balance.Cents)
	}
	e.Authorize(now, holdReq(usd(5), 1, "h3"), "h3", "")
	if ids := e.ReleaseAll(now); len(ids) != 1 || ids[0] != "h3" || len(e.Holds) != 0 {
		t.Errorf("ReleaseAll = %v, holds left %v", ids, e.Holds)
	}
}

func TestEntitlement_Refund(t *testing.T) {
	t.Run("Credits", func(t *testing.T) {
		e := credits(100)
		c, _ := e.Consume(now, req(usd(40), 1), "c1", "")
		if err := e.Refund(now, &c, entitlement.Amount{Cost: usd(41)}); !isField(err, "cost.cents") {
			t.Errorf("Refund(41 of 40) = %v, want a cost.cents error", err)
		}
		if err := e.Refund(now, &c, entitlement.Amount{Cost: usd(0)}); !isField(err, "cost.cents") {
			t.Errorf("Refund(0) = %v, want a cost.cents error", err)
		}
		if err := e.Refund(now, &c, entitlement.Amount{Cost: usd(15)}); err != nil {
			t.Fatal(err)
		}
		if e.Credits.Balance.Cents != 75 || c.Refund == nil || c.Refund.Cost != *usd(15) {
			t.Errorf("after refund of 15: balance %d, refund %+v", e.Credits.Balance.Cents, c.Refund)
		}
		if err := e.Refund(now, &c, entitlement.Amount{}); !errors.Is(err, entitlement.ErrRefundRefused) {
			t.Errorf("second Refund = %v, want ErrRefundRefused", err)
		}
	})
	t.Run("Revoked", func(t *testing.T) {
		e := credits(100)
		c, _ := e.Consume(now, req(usd(40), 1), "c1", "")
		e.Status = entitlement.StatusRevoked
		if err := e.Refund(now, &c, entitlement.Amount{}); !errors.Is(err, entitlement.ErrRefundRefused) || e.Credits.Balance.Cents != 60 {
			t.Errorf("Refund on a revoked entitlement = %v (balance %d), want ErrRefundRefused", err, e.Credits.Balance.Cents)
		}
	})
	t.Run("QuotaSamePeriodOnly", func(t *testing.T) {
		e := quota(5, 5, now.Add(time.Hour))
		c, _ := e.Consume(now, req(nil, 3), "c1", "")
		if err := e.Refund(now, &c, entitlement.Amount{Units: int64p(2)}); err != nil || e.Quota.Remaining != 4 {
			t.Errorf("Refund(2 units) = %v, remaining %d; want nil, 4", err, e.Quota.Remaining)
		}
		old, _ := e.Consume(now, req(nil, 1), "c2", "")
		next := now.Add(2 * time.Hour)
		if err := e.Refund(next, &old, entitlement.Amount{}); !errors.Is(err, entitlement.ErrRefundRefused) || e.Quota.Remaining != 5 {
			t.Errorf("Refund in the next period = %v (remaining %d), want ErrRefundRefused and the fresh quota", err, e.Quota.Remaining)
		}
	})
}

func TestConsumption_RefundCharge(t *testing.T) {
	e := credits(100)
	c, _ := e.Consume(now, req(usd(40), 2), "c1", "")
	q := quota(5, 5, now.Add(time.Hour))
	qc, _ := q.Consume(now, req(usd(40), 3), "c2", "")
	tests := []struct {
		name      string
		c         *entitlement.Consumption
		a         entitlement.Amount
		want      entitlement.Charge
		wantField string
	}{
		{"CreditsAll", &c, entitlement.Amount{}, entitlement.Charge{Cost: *usd(40)}, ""},
		{"CreditsPart", &c, entitlement.Amount{Cost: usd(15)}, entitlement.Charge{Cost: *usd(15)}, ""},
		{"CreditsMore", &c, entitlement.Amount{Cost: usd(41)}, entitlement.Charge{}, "cost.cents"},
		{"CreditsZero", &c, entitlement.Amount{Cost: usd(0)}, entitlement.Charge{}, "cost.cents"},
		{"CreditsNegative", &c, entitlement.Amount{Cost: usd(-1)}, entitlement.Charge{}, "cost.cents"},
		{"CreditsCurrency", &c, entitlement.Amount{Cost: &money.Money{Cents: 1, Currency: "EUR"}}, entitlement.Charge{}, "cost.currency"},
		{"QuotaAll", &qc, entitlement.Amount{}, entitlement.Charge{Units: 3}, ""},
		{"QuotaPart", &qc, entitlement.Amount{Units: int64p(1)}, entitlement.Charge{Units: 1}, ""},
		{"QuotaMore", &qc, entitlement.Amount{Units: int64p(4)}, entitlement.Charge{}, "units"},
		{"QuotaZero", &qc, entitlement.Amount{Units: int64p(0)}, entitlement.Charge{}, "units"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.c.RefundCharge(tt.a)
			if tt.wantField != "" {
				if !isField(err, tt.wantField) {
					t.Errorf("RefundCharge = %+v, %v; want a field error naming %s", got, err, tt.wantField)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("RefundCharge = %+v, %v; want %+v", got, err, tt.want)
			}
		})
	}
	// The amount is checked before the state: a refunded consumption still
	// answers a bad amount with the field.
	if err := e.Refund(now, &c, entitlement.Amount{}); err != nil {
		t.Fatal(err)
	}
	if err := e.Refund(now, &c, entitlement.Amount{Cost: usd(41)}); !isField(err, "cost.cents") {
		t.Errorf("Refund(41) of a refunded consumption = %v, want a cost.cents error", err)
	}
}

func TestEntitlement_RefreshHeld(t *testing.T) {
	// Nothing held is the zero value, whether or not a rule has run.
	e := credits(100)
	e.Refresh(now)
	if e.Credits.Held != (money.Money{}) {
		t.Errorf("held with no holds = %+v, want the zero value", e.Credits.Held)
	}
	h, _ := e.Authorize(now, holdReq(usd(10), 1, "h1"), "h1", "")
	if e.Credits.Held != *usd(10) {
		t.Errorf("held = %+v, want 10 USD", e.Credits.Held)
	}
	e.Release(now, &h)
	if e.Credits.Held != (money.Money{}) {
		t.Errorf("held after the release = %+v, want the zero value", e.Credits.Held)
	}
}

func isField(err error, name string) bool {
	var fe *field.Error
	return errors.As(err, &fe) && fe.Field == name
}

func TestCredits_MarshalJSON(t *testing.T) {
	// Neither a hold nor a grant recorded: both show in the balance's currency.
	b, err := json.Marshal(entitlement.Credits{Balance: *usd(5)})
	want := `{"balance":{"cents":5,"currency":"USD"},"granted":{"cents":0,"currency":"USD"},"held":{"cents":0,"currency":"USD"}}`
	if err != nil || string(b) != want {
		t.Errorf("Marshal = %s, %v; want %s", b, err, want)
	}
}
