package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
)

// authorizeBody is an authorize request for agent with key, holding up to
// maxCents USD.
func authorizeBody(agent, key string, maxCents int64) map[string]any {
	return map[string]any{"agentId": agent, "service": "search", "tool": "web", "idempotencyKey": key,
		"maxCost": map[string]any{"cents": maxCents, "currency": "USD"}}
}

// holdAnswer is the 200 body of authorize, capture and release.
type holdAnswer struct {
	Result      string
	Hold        entitlement.Hold
	Consumption *entitlement.Consumption
}

// authorize holds maxCents for agentA under key and returns the hold.
func (e *env) authorize(key string, maxCents int64) entitlement.Hold {
	e.t.Helper()
	var out holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, key, maxCents)}).decode(e.t, &out)
	if out.Result != "held" || out.Hold.Status != entitlement.HoldOpen {
		e.t.Fatalf("authorize %s: got %+v, want a new open hold", key, out)
	}
	return out.Hold
}

// credits returns the balance and what holds reserve of a credits entitlement.
func (e *env) credits(id string) (balance, held int64) {
	e.t.Helper()
	var out entitlement.Entitlement
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/entitlements/" + id, Key: e.keys.Admin}).decode(e.t, &out)
	return out.Credits.Balance.Cents, out.Credits.Held.Cents
}

// wantCredits fails unless the entitlement's balance and held are as given.
func (e *env) wantCredits(id string, balance, held int64) {
	e.t.Helper()
	if b, h := e.credits(id); b != balance || h != held {
		e.t.Errorf("entitlement %s: balance %d, held %d; want %d, %d", id, b, h, balance, held)
	}
}

// wantProblem fails unless res is a problem of kind k with status.
func wantProblem(t *testing.T, res response, status int, k problem.Kind) problem.Problem {
	t.Helper()
	p := res.problem(t)
	if res.Status != status || p.Type != k.URI() {
		t.Errorf("answer %d %s, want %d %s; body %s", res.Status, p.Type, status, k.URI(), res.Body)
	}
	return p
}

func capturePath(id string) string { return "/v1/holds/" + id + "/capture" }
func releasePath(id string) string { return "/v1/holds/" + id + "/release" }

func usd(cents int64) map[string]any { return map[string]any{"cents": cents, "currency": "USD"} }

func TestHolds_AuthorizeAndCapture(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	h := e.authorize("k1", 40)
	if h.EntitlementID != id || h.MaxCost != (money.Money{Cents: 40, Currency: "USD"}) || h.MaxUnits != 1 ||
		!h.ExpiresAt.Equal(h.CreatedAt.Add(entitlement.DefaultHoldTTL)) || h.IdempotencyKey != "k1" {
		t.Fatalf("hold = %+v, want 40 USD on %s for the default TTL", h, id)
	}
	e.wantCredits(id, 100, 40)

	t.Run("AuthorizeReplay", func(t *testing.T) {
		var again holdAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, "k1", 40)}).decode(t, &again)
		if again.Result != "replay" || again.Hold.ID != h.ID {
			t.Errorf("authorize again: got %+v, want a replay of %s", again, h.ID)
		}
		e.wantCredits(id, 100, 40)
	})
	t.Run("HeldIsNotAvailable", func(t *testing.T) {
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: consumeBody(agentA, "c1", 60)})
		p := e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: consumeBody(agentA, "c1", 61)}).problem(t)
		if len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonInsufficientBalance {
			t.Errorf("check beyond what is available: reasons %+v, want insufficient_balance", p.Reasons)
		}
	})

	var got holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host,
		Body: map[string]any{"agentId": agentA, "cost": usd(25)}}).decode(t, &got)
	c := got.Consumption
	if got.Result != "captured" || c == nil || c.HoldID != h.ID || c.Cost.Cents != 25 || c.BalanceAfter.Cents != 75 ||
		c.IdempotencyKey != "k1" || c.EntitlementID != id {
		t.Fatalf("capture: got %+v, want captured with a consumption of 25 USD leaving 75", got)
	}
	if got.Hold.Status != entitlement.HoldCaptured || got.Hold.Captured == nil || got.Hold.Captured.Cost.Cents != 25 ||
		got.Hold.ConsumptionID != c.ID || got.Hold.EndedAt == nil {
		t.Errorf("captured hold = %+v, want captured 25 USD by %s", got.Hold, c.ID)
	}
	e.wantCredits(id, 75, 0)

	t.Run("CaptureReplay", func(t *testing.T) {
		var again holdAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host,
			Body: map[string]any{"agentId": agentA, "cost": usd(25)}}).decode(t, &again)
		if again.Result != "replay" || again.Consumption == nil || again.Consumption.ID != c.ID {
			t.Errorf("capture again: got %+v, want a replay of consumption %s", again, c.ID)
		}
		e.wantCredits(id, 75, 0)
	})
	t.Run("CaptureOtherAmountIsHoldConflict", func(t *testing.T) {
		wantProblem(t, e.do(req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host,
			Body: map[string]any{"agentId": agentA, "cost": usd(26)}}), http.StatusConflict, problem.HoldConflict)
		e.wantCredits(id, 75, 0)
	})
	t.Run("ReleaseCapturedIsHoldConflict", func(t *testing.T) {
		wantProblem(t, e.do(req{Method: "POST", Path: releasePath(h.ID), Key: e.keys.Host,
			Body: map[string]any{"agentId": agentA}}), http.StatusConflict, problem.HoldConflict)
		e.wantCredits(id, 75, 0)
	})
	t.Run("GetHold", func(t *testing.T) {
		for _, key := range []string{e.keys.Host, e.keys.Billing, e.keys.Admin} {
			var read entitlement.Hold
			e.must(http.StatusOK, req{Method: "GET", Path: "/v1/holds/" + h.ID, Key: key}).decode(t, &read)
			if diff := cmp.Diff(got.Hold, read); diff != "" {
				t.Errorf("GET hold differs from the capture's answer (-capture +get):\n%s", diff)
			}
		}
		e.must(http.StatusForbidden, req{Method: "GET", Path: "/v1/holds/" + h.ID, Key: e.keys.Reader})
		wantProblem(t, e.do(req{Method: "GET", Path: "/v1/holds/no-such-hold", Key: e.keys.Billing}), http.StatusNotFound, problem.NotFound)
	})
	t.Run("CaptureDefaultsToTheHold", func(t *testing.T) {
		h := e.authorize("k2", 30)
		var all holdAnswer
		e.must(http.StatusOK, req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host,
			Body: map[string]any{"agentId": agentA}}).decode(t, &all)
		if all.Result != "captured" || all.Consumption.Cost.Cents != 30 {
			t.Errorf("capture without an amount: got %+v, want 30 USD charged", all)
		}
		e.wantCredits(id, 45, 0)
	})
}

func TestHolds_Release(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	h := e.authorize("k1", 40)
	var got holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: releasePath(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}).decode(t, &got)
	if got.Result != "released" || got.Hold.Status != entitlement.HoldReleased || got.Consumption != nil {
		t.Fatalf("release: got %+v, want released", got)
	}
	e.wantCredits(id, 100, 0)
	var again holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: releasePath(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}).decode(t, &again)
	if again.Result != "replay" || again.Hold.Status != entitlement.HoldReleased {
		t.Errorf("release again: got %+v, want a replay", again)
	}
	wantProblem(t, e.do(req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}),
		http.StatusConflict, problem.HoldConflict)
	e.wantCredits(id, 100, 0)
}

func TestHolds_Expiry(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	body := authorizeBody(agentA, "k1", 40)
	body["ttlSeconds"] = 60
	var held holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: body}).decode(t, &held)
	h := held.Hold
	if !h.ExpiresAt.Equal(h.CreatedAt.Add(time.Minute)) {
		t.Fatalf("hold expires at %v, want a minute after %v", h.ExpiresAt, h.CreatedAt)
	}
	e.clock.Advance(time.Minute)
	var read entitlement.Hold
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/holds/" + h.ID, Key: e.keys.Billing}).decode(t, &read)
	if read.Status != entitlement.HoldExpired {
		t.Errorf("GET of a hold past its expiry: status %q, want expired", read.Status)
	}
	e.wantCredits(id, 100, 0)
	p := wantProblem(t, e.do(req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}),
		http.StatusConflict, problem.HoldExpired)
	if p.Detail == "" {
		t.Errorf("hold-expired problem has no detail")
	}
	e.wantCredits(id, 100, 0)
	var rel holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: releasePath(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}).decode(t, &rel)
	if rel.Result != "replay" || rel.Hold.Status != entitlement.HoldExpired {
		t.Errorf("release of an expired hold: got %+v, want a replay showing expired", rel)
	}
}

// TestHolds_OtherAgentsHoldIsNotFound: capture and release of another
// agent's hold answer exactly like those of an unknown one.
func TestHolds_OtherAgentsHoldIsNotFound(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	h := e.authorize("k1", 40)
	for _, path := range []func(string) string{capturePath, releasePath} {
		other := e.must(http.StatusNotFound, req{Method: "POST", Path: path(h.ID), Key: e.keys.Host, Body: map[string]any{"agentId": agentB}}).problem(t)
		missing := e.must(http.StatusNotFound, req{Method: "POST", Path: path("no-such-hold"), Key: e.keys.Host, Body: map[string]any{"agentId": agentA}}).problem(t)
		if other.Type != missing.Type || other.Detail != missing.Detail {
			t.Errorf("%s: another agent's hold answers %+v, an unknown one %+v; want the same", path(h.ID), other, missing)
		}
	}
	e.wantCredits(id, 100, 40)
}

func TestHolds_AuthorizeRefusals(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	t.Run("DeniedIs402WithReasons", func(t *testing.T) {
		p := wantProblem(t, e.do(req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, "big", 101)}),
			http.StatusPaymentRequired, problem.PaymentRequired)
		want := []entitlement.Denial{{EntitlementID: id, Reason: entitlement.ReasonInsufficientBalance}}
		if diff := cmp.Diff(want, p.Reasons); diff != "" {
			t.Errorf("reasons (-want +got):\n%s", diff)
		}
		p = wantProblem(t, e.do(req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody("nobody", "k", 1)}),
			http.StatusPaymentRequired, problem.PaymentRequired)
		if len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonNotFound {
			t.Errorf("reasons = %+v, want one not_found", p.Reasons)
		}
	})
	t.Run("KeyOfAConsumeIs422", func(t *testing.T) {
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "used", 10)})
		wantProblem(t, e.do(req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, "used", 10)}),
			http.StatusUnprocessableEntity, problem.IdempotencyKeyReused)
	})
	t.Run("KeyOfAHoldIs422ForAConsume", func(t *testing.T) {
		e.authorize("held", 10)
		wantProblem(t, e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "held", 10)}),
			http.StatusUnprocessableEntity, problem.IdempotencyKeyReused)
	})
	t.Run("OtherParametersIs422", func(t *testing.T) {
		wantProblem(t, e.do(req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, "held", 11)}),
			http.StatusUnprocessableEntity, problem.IdempotencyKeyReused)
	})
	e.wantCredits(id, 90, 10)
}

// TestHolds_BadInput: bad bodies are 4xx problems naming the field, and
// neither the balance nor the open hold changes.
func TestHolds_BadInput(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	h := e.authorize("k1", 40)
	call := `"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k2"`
	tests := []struct {
		name, path, body, field string
	}{
		{"AuthorizeUnknownField", "/v1/authorize", `{` + call + `,"maxCost":{"cents":1,"currency":"USD"},"cost":{"cents":1,"currency":"USD"}}`, "cost"},
		{"AuthorizeFloatCents", "/v1/authorize", `{` + call + `,"maxCost":{"cents":1.5,"currency":"USD"}}`, "maxCost.cents"},
		{"AuthorizeCentsBeyondMaxSafe", "/v1/authorize", `{` + call + `,"maxCost":{"cents":9007199254740992,"currency":"USD"}}`, "maxCost.cents"},
		{"AuthorizeNegativeCents", "/v1/authorize", `{` + call + `,"maxCost":{"cents":-1,"currency":"USD"}}`, "maxCost.cents"},
		{"AuthorizeBadCurrency", "/v1/authorize", `{` + call + `,"maxCost":{"cents":1,"currency":"usd"}}`, "maxCost.currency"},
		{"AuthorizeMaxUnitsOver", "/v1/authorize", `{` + call + `,"maxUnits":1000001}`, "maxUnits"},
		{"AuthorizeMaxUnitsZero", "/v1/authorize", `{` + call + `,"maxUnits":0}`, "maxUnits"},
		{"AuthorizeMaxUnitsNull", "/v1/authorize", `{` + call + `,"maxUnits":null}`, "maxUnits"},
		{"AuthorizeMaxCostNull", "/v1/authorize", `{` + call + `,"maxCost":null}`, "maxCost"},
		{"AuthorizeMaxUnitsString", "/v1/authorize", `{` + call + `,"maxUnits":"1"}`, "maxUnits"},
		{"AuthorizeTTLOver", "/v1/authorize", `{` + call + `,"ttlSeconds":86401}`, "ttlSeconds"},
		{"AuthorizeTTLNegative", "/v1/authorize", `{` + call + `,"ttlSeconds":-1}`, "ttlSeconds"},
		{"AuthorizeTTLFraction", "/v1/authorize", `{` + call + `,"ttlSeconds":1.5}`, "ttlSeconds"},
		{"AuthorizeMissingTool", "/v1/authorize", `{"agentId":"agent-a","service":"search","idempotencyKey":"k2"}`, "tool"},
		{"AuthorizeAnyService", "/v1/authorize", `{"agentId":"agent-a","service":"*","tool":"web","idempotencyKey":"k2"}`, "service"},
		{"AuthorizeLongKey", "/v1/authorize", `{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"` + strings.Repeat("k", 256) + `"}`, "idempotencyKey"},
		{"AuthorizeTrailing", "/v1/authorize", `{` + call + `} {}`, ""},
		{"CaptureOverTheHold", capturePath(h.ID), `{"agentId":"agent-a","cost":{"cents":41,"currency":"USD"}}`, "cost.cents"},
		{"CaptureOtherCurrency", capturePath(h.ID), `{"agentId":"agent-a","cost":{"cents":1,"currency":"EUR"}}`, "cost.currency"},
		{"CaptureNegativeCents", capturePath(h.ID), `{"agentId":"agent-a","cost":{"cents":-1,"currency":"USD"}}`, "cost.cents"},
		{"CaptureFloatCents", capturePath(h.ID), `{"agentId":"agent-a","cost":{"cents":0.5,"currency":"USD"}}`, "cost.cents"},
		{"CaptureUnitsOverTheHold", capturePath(h.ID), `{"agentId":"agent-a","units":2}`, "units"},
		{"CaptureNegativeUnits", capturePath(h.ID), `{"agentId":"agent-a","units":-1}`, "units"},
		// Only an omitted member charges the hold's maximum.
		{"CaptureCostNull", capturePath(h.ID), `{"agentId":"agent-a","cost":null}`, "cost"},
		{"CaptureUnitsNull", capturePath(h.ID), `{"agentId":"agent-a","units":null}`, "units"},
		{"CaptureUnknownField", capturePath(h.ID), `{"agentId":"agent-a","amount":1}`, "amount"},
		{"CaptureMissingAgent", capturePath(h.ID), `{"cost":{"cents":1,"currency":"USD"}}`, "agentId"},
		{"CaptureEmptyBody", capturePath(h.ID), ``, ""},
		{"ReleaseUnknownField", releasePath(h.ID), `{"agentId":"agent-a","reason":"x"}`, "reason"},
		{"ReleaseMissingAgent", releasePath(h.ID), `{}`, "agentId"},
		{"ReleaseAgentNotString", releasePath(h.ID), `{"agentId":1}`, "agentId"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := e.must(http.StatusBadRequest, req{Method: "POST", Path: tt.path, Key: e.keys.Host, Body: tt.body})
			wantField(t, res, tt.field)
		})
	}
	t.Run("MediaType", func(t *testing.T) {
		res := e.must(http.StatusUnsupportedMediaType, req{Method: "POST", Path: capturePath(h.ID), Key: e.keys.Host,
			Body: `{"agentId":"agent-a"}`, Header: map[string]string{"Content-Type": "text/plain"}})
		wantProblem(t, res, http.StatusUnsupportedMediaType, problem.UnsupportedMediaType)
	})
	t.Run("Oversize", func(t *testing.T) {
		big := `{"agentId":"` + strings.Repeat("a", api.DefaultBodyLimit) + `"}`
		for _, path := range []string{"/v1/authorize", capturePath(h.ID), releasePath(h.ID)} {
			wantProblem(t, e.do(req{Method: "POST", Path: path, Key: e.keys.Host, Body: big}), http.StatusRequestEntityTooLarge, problem.BodyTooLarge)
		}
	})
	e.wantCredits(id, 100, 40)
	var read entitlement.Hold
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/holds/" + h.ID, Key: e.keys.Host}).decode(t, &read)
	if diff := cmp.Diff(h, read); diff != "" {
		t.Errorf("hold changed by bad requests (-before +after):\n%s", diff)
	}
	var list struct{ Items []entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/consumptions", Key: e.keys.Admin}).decode(t, &list)
	if len(list.Items) != 0 {
		t.Errorf("consumptions after bad requests = %d, want 0", len(list.Items))
	}
}

// TestHolds_Quota: a quota hold reserves units; the capture charges the
// units the call used.
func TestHolds_Quota(t *testing.T) {
	e := newEnv(t)
	var q entitlement.Entitlement
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "quota", "scope": map[string]any{"service": "search"}, "limit": 10, "period": "day"}}).decode(t, &q)
	var held holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: map[string]any{
		"agentId": agentA, "service": "search", "tool": "web", "idempotencyKey": "q1", "maxUnits": 4}}).decode(t, &held)
	quota := func() entitlement.Quota {
		var out entitlement.Entitlement
		e.must(http.StatusOK, req{Method: "GET", Path: "/v1/entitlements/" + q.ID, Key: e.keys.Billing}).decode(t, &out)
		return out.Quota
	}
	if got := quota(); got.Remaining != 10 || got.Held != 4 {
		t.Errorf("quota after authorize: remaining %d, held %d; want 10, 4", got.Remaining, got.Held)
	}
	var cap holdAnswer
	e.must(http.StatusOK, req{Method: "POST", Path: capturePath(held.Hold.ID), Key: e.keys.Host,
		Body: map[string]any{"agentId": agentA, "units": 3}}).decode(t, &cap)
	if cap.Consumption == nil || cap.Consumption.Units != 3 || cap.Consumption.RemainingAfter == nil || *cap.Consumption.RemainingAfter != 7 {
		t.Errorf("capture of 3 units: got %+v, want 3 units leaving 7", cap.Consumption)
	}
	if got := quota(); got.Remaining != 7 || got.Held != 0 {
		t.Errorf("quota after capture: remaining %d, held %d; want 7, 0", got.Remaining, got.Held)
	}
}
