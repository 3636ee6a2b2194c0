package api_test

import (
	"net/http"
	"slices"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// patchEntitlement sends PATCH /v1/entitlements/{id} as admin.
func (e *env) patchEntitlement(id string, body any) response {
	e.t.Helper()
	return e.do(req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: e.keys.Admin, Body: body})
}

func usdBody(cents int64) map[string]any { return map[string]any{"cents": cents, "currency": "USD"} }

func TestGrant_Limits(t *testing.T) {
	e := newEnv(t)
	var got entitlement.Entitlement
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}, "balance": usdBody(1000),
			"limits": map[string]any{"maxPerCall": usdBody(50), "spendLimit": map[string]any{"period": "day", "max": usdBody(80)}},
			"alerts": []any{map[string]any{"percent": 20}}}}).decode(t, &got)
	if m := got.Limits.MaxPerCall; m == nil || *m != (money.Money{Cents: 50, Currency: "USD"}) || got.Limits.Spend.Max.Cents != 80 || len(got.Alerts) != 1 {
		t.Fatalf("granted with limits: %+v, alerts %+v", got.Limits, got.Alerts)
	}
	p := e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 51)}).problem(t)
	if len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonMaxPerCall {
		t.Errorf("consume of 51 under maxPerCall 50: reasons %+v, want %s", p.Reasons, entitlement.ReasonMaxPerCall)
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k2", 50)})
	p = e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k3", 31)}).problem(t)
	if len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonSpendLimit {
		t.Errorf("consume of 31 with 50 of 80 spent today: reasons %+v, want %s", p.Reasons, entitlement.ReasonSpendLimit)
	}

	bad := []struct {
		name  string
		body  map[string]any
		field string
	}{
		{"OtherCurrency", map[string]any{"limits": map[string]any{"maxPerCall": map[string]any{"cents": 5, "currency": "EUR"}}}, "limits.maxPerCall.currency"},
		{"NegativeThreshold", map[string]any{"alerts": []any{map[string]any{"amount": usdBody(-1)}}}, "alerts[0].amount.cents"},
		{"UnitsOnCredits", map[string]any{"limits": map[string]any{"maxUnitsPerCall": 3}}, "limits.maxUnitsPerCall"},
		{"SpendLimitWithoutPeriod", map[string]any{"limits": map[string]any{"spendLimit": map[string]any{"max": usdBody(5)}}}, "limits.spendLimit.period"},
		{"UnknownLimit", map[string]any{"limits": map[string]any{"perHour": 5}}, "limits.perHour"},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			body := map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}, "balance": usdBody(1000)}
			for k, v := range tt.body {
				body[k] = v
			}
			p := e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin, Body: body}).problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Errorf("errors %+v, want one naming %s", p.Errors, tt.field)
			}
		})
	}
}

func TestPatchEntitlement(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 1000)
	var got entitlement.Entitlement
	res := e.patchEntitlement(id, map[string]any{
		"limits":    map[string]any{"maxPerCall": usdBody(100), "spendLimit": map[string]any{"period": "hour", "max": usdBody(300)}},
		"alerts":    []any{map[string]any{"amount": usdBody(500)}, map[string]any{"percent": 10}},
		"metadata":  map[string]string{"team": "blue"},
		"expiresAt": "2030-01-01T00:00:00Z",
	})
	if res.Status != http.StatusOK {
		t.Fatalf("PATCH: status %d body %s", res.Status, res.Body)
	}
	res.decode(t, &got)
	if got.Limits.MaxPerCall.Cents != 100 || got.Limits.Spend.Period != entitlement.PeriodHour || len(got.Alerts) != 2 ||
		got.Metadata["team"] != "blue" || got.ExpiresAt == nil || got.ExpiresAt.Year() != 2030 {
		t.Fatalf("after PATCH: %+v", got)
	}
	// Absent members stay; null removes one.
	got = entitlement.Entitlement{} // decoding leaves absent members as they are
	e.must(http.StatusOK, req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: e.keys.Admin,
		Body: `{"limits": {"maxPerCall": null}, "expiresAt": null}`}).decode(t, &got)
	if got.Limits.MaxPerCall != nil || got.Limits.Spend.Period != entitlement.PeriodHour || got.ExpiresAt != nil || len(got.Alerts) != 2 {
		t.Errorf("after removing maxPerCall and the expiry: limits %+v, expiresAt %v, %d alerts", got.Limits, got.ExpiresAt, len(got.Alerts))
	}
	got = entitlement.Entitlement{}
	e.must(http.StatusOK, req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: e.keys.Admin,
		Body: `{"limits": null, "alerts": null, "metadata": null}`}).decode(t, &got)
	if !got.Limits.IsZero() || len(got.Alerts) != 0 || len(got.Metadata) != 0 {
		t.Errorf("after removing all: limits %+v, alerts %+v, metadata %v", got.Limits, got.Alerts, got.Metadata)
	}
	e.must(http.StatusOK, req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: e.keys.Admin, Body: `{}`})

	t.Run("OtherMembersNamed", func(t *testing.T) {
		p := e.must(http.StatusBadRequest, req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: e.keys.Admin,
			Body: `{"balance": {"cents": 5, "currency": "USD"}, "metadata": {}, "scope": {"service": "*"}}`}).problem(t)
		var fields []string
		for _, fe := range p.Errors {
			fields = append(fields, fe.Field)
		}
		if !slices.Equal(fields, []string{"balance", "scope"}) {
			t.Errorf("errors name %v, want [balance scope]", fields)
		}
	})
	bad := []struct {
		name, body, field string
	}{
		{"OtherCurrency", `{"limits": {"spendLimit": {"period": "day", "max": {"cents": 5, "currency": "EUR"}}}}`, "limits.spendLimit.max.currency"},
		{"NegativeThreshold", `{"alerts": [{"percent": 5}, {"amount": {"cents": -5, "currency": "USD"}}]}`, "alerts[1].amount.cents"},
		{"TwoThresholds", `{"alerts": [{"percent": 5, "amount": {"cents": 5, "currency": "USD"}}]}`, "alerts[0]"},
		{"PercentOutOfRange", `{"alerts": [{"percent": 0}]}`, "alerts[0].percent"},
		{"PastExpiry", `{"expiresAt": "2001-01-01T00:00:00Z"}`, "expiresAt"},
		{"BadPeriod", `{"limits": {"spendLimit": {"period": "year", "max": {"cents": 5, "currency": "USD"}}}}`, "limits.spendLimit.period"},
		{"Fraction", `{"limits": {"maxPerCall": {"cents": 1.5, "currency": "USD"}}}`, "limits.maxPerCall.cents"},
		{"WrongType", `{"alerts": {"percent": 5}}`, "alerts"},
		{"NotAnObject", `[]`, ""},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			p := e.must(http.StatusBadRequest, req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: e.keys.Admin, Body: tt.body}).problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Errorf("PATCH %s: errors %+v, want one naming %q", tt.body, p.Errors, tt.field)
			}
		})
	}
	t.Run("NotFoundAndRoles", func(t *testing.T) {
		e.must(http.StatusNotFound, req{Method: "PATCH", Path: "/v1/entitlements/no-such", Key: e.keys.Admin, Body: `{}`})
		for _, key := range []string{e.keys.Host, e.keys.Billing, e.keys.Reader} {
			e.must(http.StatusForbidden, req{Method: "PATCH", Path: "/v1/entitlements/" + id, Key: key, Body: `{}`})
		}
	})
}

// FuzzPatchEntitlement: whatever the body, PATCH /v1/entitlements/{id} and
// PUT /v1/accounts/{agentId}/limits answer 200 or a 4xx problem naming a
// field; they never panic. The seeds run in every normal test run.
func FuzzPatchEntitlement(f *testing.F) {
	for _, s := range []string{
		`{"limits":{"maxPerCall":{"cents":5,"currency":"USD"},"spendLimit":{"period":"day","max":{"cents":50,"currency":"USD"}}}}`,
		`{"limits":{"maxUnitsPerCall":3,"spendLimit":{"period":"week","maxUnits":10}}}`,
		`{"alerts":[{"amount":{"cents":10,"currency":"USD"}},{"percent":50},{"units":2}]}`,
		`{"limits":null,"alerts":null,"metadata":null,"expiresAt":null}`,
		`{"limits":{"spendLimit":{}}}`,
		`{"limits":{"maxPerCall":{"cents":-1,"currency":"USD"}}}`,
		`{"alerts":[{}]}`,
		`{"metadata":{"a":"b"},"expiresAt":"2030-01-01T00:00:00Z"}`,
		`{"balance":1,"type":"quota","status":"revoked"}`,
		`{"limits":{"limits":{}}}`,
		`{"alerts":[` + `{"percent":1},{"percent":2},{"percent":3},{"percent":4},{"percent":5},{"percent":6},{"percent":7},{"percent":8},{"percent":9},{"percent":10},{"percent":11}]}`,
		`{"limits":1}`, `{"expiresAt":"yesterday"}`, `{"limits":{"maxPerCall":null,"maxPerCall":null}}`,
		`{"maxPerCall":[{"cents":5,"currency":"USD"},{"cents":7,"currency":"EUR"}],"maxUnitsPerCall":3}`,
		`{"maxPerCall":[{"cents":5,"currency":"USD"},{"cents":7,"currency":"USD"}]}`,
		`{"maxPerCall":null,"maxUnitsPerCall":0}`,
		`[]`, `null`, ``, `{`, `{}`, `{} {}`,
	} {
		f.Add([]byte(s))
	}
	base := newEnv(f)
	credits := base.grantCredits(agentA, 1000)
	var quota struct{ ID string }
	base.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: base.keys.Admin,
		Body: map[string]any{"type": "quota", "scope": map[string]any{"service": "search"}, "limit": 10, "period": "day"}}).decode(f, &quota)
	f.Fuzz(func(t *testing.T, body []byte) {
		e := base.with(t)
		e.noSpec = true // TestPatchEntitlement checks the answers against the spec
		for _, r := range []req{
			{Method: "PATCH", Path: "/v1/entitlements/" + credits},
			{Method: "PATCH", Path: "/v1/entitlements/" + quota.ID},
			{Method: "PUT", Path: "/v1/accounts/" + agentA + "/limits"},
		} {
			r.Key, r.Body = e.keys.Admin, body
			res := e.do(r)
			switch {
			case res.Status == http.StatusOK:
				continue
			case res.Status >= 500 || res.Status < 400:
				t.Fatalf("%s %s %q: status %d body %s", r.Method, r.Path, body, res.Status, res.Body)
			}
			if p := res.problem(t); len(p.Errors) == 0 || p.Detail == "" {
				t.Fatalf("%s %s %q: problem %+v names no field", r.Method, r.Path, body, p)
			}
		}
	})
}

func TestAccountLimits(t *testing.T) {
	e := newEnv(t)
	e.grantCredits(agentA, 1000)
	var a entitlement.Account
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA + "/limits", Key: e.keys.Admin,
		Body: map[string]any{"maxPerCall": []any{usdBody(40)}}}).decode(t, &a)
	if len(a.Limits.MaxPerCall) != 1 || a.Limits.MaxPerCall[0].Cents != 40 {
		t.Fatalf("account limits = %+v, want 40 USD per call", a.Limits)
	}
	p := e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 41)}).problem(t)
	if len(p.Reasons) != 1 || p.Reasons[0] != (entitlement.Denial{Reason: entitlement.ReasonMaxPerCall}) {
		t.Errorf("consume of 41 under an account cap of 40: reasons %+v, want one max_per_call_exceeded without an entitlement", p.Reasons)
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k2", 40)})
	p = e.must(http.StatusBadRequest, req{Method: "PUT", Path: "/v1/accounts/" + agentA + "/limits", Key: e.keys.Admin,
		Body: map[string]any{"maxPerCall": []any{usdBody(40), usdBody(50)}}}).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "maxPerCall[1].currency" {
		t.Errorf("two USD caps: errors %+v, want maxPerCall[1].currency", p.Errors)
	}
	e.must(http.StatusForbidden, req{Method: "PUT", Path: "/v1/accounts/" + agentA + "/limits", Key: e.keys.Billing, Body: `{}`})
	a = entitlement.Account{}
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA + "/limits", Key: e.keys.Admin, Body: `{}`}).decode(t, &a)
	if !a.Limits.IsZero() {
		t.Errorf("after {}: limits %+v, want none", a.Limits)
	}
}
