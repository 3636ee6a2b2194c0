package api_test

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
)

// refundAnswer is the 200 body of a consumption refund.
type refundAnswer struct {
	Consumption entitlement.Consumption
	Entitlement entitlement.Entitlement
}

func refundPath(id string) string { return "/v1/consumptions/" + id + "/refund" }

// consume charges cents USD to agentA under key and returns the consumption.
func (e *env) consume(key string, cents int64) entitlement.Consumption {
	e.t.Helper()
	var out struct{ Consumption entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, key, cents)}).decode(e.t, &out)
	return out.Consumption
}

func TestRefundConsumption(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	c := e.consume("k1", 30)
	hdr := map[string]string{idempotency.HeaderKey: "refund-1"}
	first := e.must(http.StatusOK, req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing, Header: hdr,
		Body: map[string]any{"cost": usd(10)}})
	var got refundAnswer
	first.decode(t, &got)
	r := got.Consumption.Refund
	if r == nil || r.Cost.Cents != 10 || r.Cost.Currency != "USD" || got.Consumption.ID != c.ID {
		t.Fatalf("refund: consumption %+v, want %s with a refund of 10 USD", got.Consumption, c.ID)
	}
	if got.Entitlement.ID != id || got.Entitlement.Credits.Balance.Cents != 80 {
		t.Errorf("refund: entitlement %+v, want %s with 80 left", got.Entitlement, id)
	}
	e.wantCredits(id, 80, 0)

	t.Run("SameKeyReplays", func(t *testing.T) {
		again := e.must(http.StatusOK, req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing, Header: hdr,
			Body: map[string]any{"cost": usd(10)}})
		if again.Header.Get(idempotency.HeaderReplayed) != "true" || string(again.Body) != string(first.Body) {
			t.Errorf("retry: replayed %q, body %s; want the first answer replayed", again.Header.Get(idempotency.HeaderReplayed), again.Body)
		}
		wantProblem(t, e.do(req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing, Header: hdr,
			Body: map[string]any{"cost": usd(11)}}), http.StatusUnprocessableEntity, problem.IdempotencyKeyReused)
		e.wantCredits(id, 80, 0)
	})
	t.Run("SameAmountAnswersTheRefund", func(t *testing.T) {
		var again refundAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Admin, Body: map[string]any{"cost": usd(10)}}).decode(t, &again)
		if diff := cmp.Diff(got.Consumption, again.Consumption); diff != "" {
			t.Errorf("second refund with the same amount (-first +second):\n%s", diff)
		}
		e.wantCredits(id, 80, 0)
	})
	t.Run("OtherAmountIsRefundRefused", func(t *testing.T) {
		wantProblem(t, e.do(req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing, Body: map[string]any{"cost": usd(5)}}),
			http.StatusConflict, problem.RefundRefused)
		e.wantCredits(id, 80, 0)
	})
	t.Run("ConsumeReplayShowsTheRefund", func(t *testing.T) {
		var replay struct {
			Result      string
			Consumption entitlement.Consumption
		}
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 30)}).decode(t, &replay)
		if replay.Result != "replay" || replay.Consumption.Refund == nil || replay.Consumption.Refund.Cost.Cents != 10 {
			t.Errorf("consume replay of a refunded consumption: got %+v, want the refund shown", replay)
		}
	})
	t.Run("NoBodyRefundsAll", func(t *testing.T) {
		c := e.consume("k2", 20)
		e.wantCredits(id, 60, 0)
		var all refundAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Admin}).decode(t, &all)
		if all.Consumption.Refund == nil || all.Consumption.Refund.Cost.Cents != 20 {
			t.Errorf("refund without a body: %+v, want all 20 USD back", all.Consumption.Refund)
		}
		e.wantCredits(id, 80, 0)
	})
	t.Run("CapturedHold", func(t *testing.T) {
		h := e.authorize("h1", 15)
		var cap holdAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}).decode(t, &cap)
		e.wantCredits(id, 65, 0)
		var back refundAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: refundPath(cap.Consumption.ID), Key: e.keys.Billing}).decode(t, &back)
		if back.Consumption.HoldID != h.ID || back.Consumption.Refund == nil {
			t.Errorf("refund of a capture: %+v, want the refunded consumption of hold %s", back.Consumption, h.ID)
		}
		e.wantCredits(id, 80, 0)
	})
}

// TestRefundConsumption_Refusals: every refusal is a problem, and neither
// the entitlement nor the consumption changes.
func TestRefundConsumption_Refusals(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	c := e.consume("k1", 30)
	tests := []struct {
		name, body, field string
	}{
		{"MoreThanCharged", `{"cost":{"cents":31,"currency":"USD"}}`, "cost.cents"},
		{"OtherCurrency", `{"cost":{"cents":1,"currency":"EUR"}}`, "cost.currency"},
		{"ZeroCents", `{"cost":{"cents":0,"currency":"USD"}}`, "cost.cents"},
		{"NegativeCents", `{"cost":{"cents":-1,"currency":"USD"}}`, "cost.cents"},
		{"FloatCents", `{"cost":{"cents":1.5,"currency":"USD"}}`, "cost.cents"},
		{"CentsBeyondMaxSafe", `{"cost":{"cents":9007199254740992,"currency":"USD"}}`, "cost.cents"},
		{"ZeroUnits", `{"units":0}`, "units"},
		// Only an omitted member gives back all that was charged.
		{"CostNull", `{"cost":null}`, "cost"},
		{"UnitsNull", `{"units":null}`, "units"},
		{"UnitsString", `{"units":"1"}`, "units"},
		{"UnknownField", `{"amount":{"cents":1,"currency":"USD"}}`, "amount"},
		{"NotAnObject", `[1]`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing, Body: tt.body}), tt.field)
		})
	}
	t.Run("UnknownConsumption", func(t *testing.T) {
		wantProblem(t, e.do(req{Method: "POST", Path: refundPath("no-such-consumption"), Key: e.keys.Billing}), http.StatusNotFound, problem.NotFound)
	})
	t.Run("Roles", func(t *testing.T) {
		for _, key := range []string{e.keys.Host, e.keys.Reader} {
			wantProblem(t, e.do(req{Method: "POST", Path: refundPath(c.ID), Key: key}), http.StatusForbidden, problem.Forbidden)
		}
	})
	t.Run("RevokedEntitlement", func(t *testing.T) {
		other := e.grantCredits(agentB, 50)
		var used struct{ Consumption entitlement.Consumption }
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentB, "b1", 5)}).decode(t, &used)
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/entitlements/" + other + "/revoke", Key: e.keys.Admin})
		wantProblem(t, e.do(req{Method: "POST", Path: refundPath(used.Consumption.ID), Key: e.keys.Billing}), http.StatusConflict, problem.RefundRefused)
	})
	e.wantCredits(id, 70, 0)
	var list struct{ Items []entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/consumptions", Key: e.keys.Admin}).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].Refund != nil {
		t.Errorf("consumptions after refused refunds = %+v, want one, not refunded", list.Items)
	}
}

// TestRefundConsumption_Quota: a quota consumption gives its units back.
func TestRefundConsumption_Quota(t *testing.T) {
	e := newEnv(t)
	var q entitlement.Entitlement
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "quota", "scope": map[string]any{"service": "search"}, "limit": 10, "period": "day"}}).decode(t, &q)
	var used struct{ Consumption entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: map[string]any{
		"agentId": agentA, "service": "search", "tool": "web", "idempotencyKey": "q1", "units": 3}}).decode(t, &used)
	wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: refundPath(used.Consumption.ID), Key: e.keys.Billing,
		Body: map[string]any{"units": 4}}), "units")
	var back refundAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: refundPath(used.Consumption.ID), Key: e.keys.Billing,
		Body: map[string]any{"units": 2}}).decode(t, &back)
	if back.Entitlement.Quota.Remaining != 9 || back.Consumption.Refund == nil || back.Consumption.Refund.Units != 2 {
		t.Errorf("refund of 2 units: remaining %d, refund %+v; want 9 and 2 units", back.Entitlement.Quota.Remaining, back.Consumption.Refund)
	}
}

// TestRefundConsumption_NeedsKey: the route is behind the ledger.
func TestRefundConsumption_NeedsKey(t *testing.T) {
	e := newEnv(t)
	e.grantCredits(agentA, 100)
	c := e.consume("k1", 30)
	e.autoKey = false // from here on, requests go as written
	wantProblem(t, e.do(req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing}), http.StatusBadRequest, problem.IdempotencyKeyMissing)
	e.must(http.StatusOK, req{Method: "POST", Path: refundPath(c.ID), Key: e.keys.Billing, Header: map[string]string{idempotency.HeaderKey: "r-1"}})
}
