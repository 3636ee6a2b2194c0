package api_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
)

// wantField checks a 400 problem that names field.
func wantField(t *testing.T, res response, field string) {
	t.Helper()
	p := res.problem(t)
	if p.Status != http.StatusBadRequest || len(p.Errors) == 0 || p.Errors[0].Field != field {
		t.Errorf("problem = %+v, want 400 naming %q", p, field)
	}
}

// TestInput_OutOfRangeInstants: an instant that turns into year 10000 in
// UTC is refused naming its field, and nothing is stored.
func TestInput_OutOfRangeInstants(t *testing.T) {
	e := newEnv(t)
	far := "9999-12-31T23:59:59-01:00"
	wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "credits", "scope": map[string]any{"service": "s"}, "balance": map[string]any{"cents": 1, "currency": "USD"}, "expiresAt": far}}),
		"expiresAt")
	hdr := map[string]string{"Idempotency-Key": "pay-far"}
	body := map[string]any{"agentId": agentA, "amount": map[string]any{"cents": 100, "currency": "USD"}, "provider": "manual",
		"grant": map[string]any{"type": "subscription", "scope": map[string]any{"service": "s"}, "validUntil": far}}
	wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: body, Header: hdr}), "grant.validUntil")
	// The same key with a valid body creates the payment: the refusal kept nothing.
	body["grant"] = map[string]any{"type": "subscription", "scope": map[string]any{"service": "s"}, "validUntil": "2027-01-01T00:00:00Z"}
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: body, Header: hdr})
	wantField(t, e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/consumptions?since=0000-01-01T00:00:00%2B01:00", Key: e.keys.Admin}), "since")
}

// TestInput_BodyFieldNames: a body's decoding and validation errors name
// the field by its dotted JSON path on every route with a body, through
// the grant embedded in a direct grant's body too.
func TestInput_BodyFieldNames(t *testing.T) {
	e := newEnv(t)
	const (
		quota   = `"type":"quota","scope":{"service":"s"},"limit":5,"period":"day"`
		payment = `"agentId":"agent-a","amount":{"cents":100,"currency":"USD"},"provider":"manual"`
		call    = `"agentId":"agent-a","service":"s","tool":"t","idempotencyKey":"k"`
	)
	entitlements := "/v1/accounts/" + agentA + "/entitlements"
	tests := []struct {
		name, path, body, field string
	}{
		{"GrantToolNotString", entitlements, `{"type":"quota","scope":{"service":"s","tools":["a",1]},"limit":5,"period":"day"}`, "scope.tools[1]"},
		{"GrantToolEmpty", entitlements, `{"type":"quota","scope":{"service":"s","tools":["a",""]},"limit":5,"period":"day"}`, "scope.tools[1]"},
		{"GrantServiceMissing", entitlements, `{"type":"quota","scope":{"tools":["a"]},"limit":5,"period":"day"}`, "scope.service"},
		{"GrantLimitFraction", entitlements, `{"type":"quota","scope":{"service":"s"},"limit":1.5,"period":"day"}`, "limit"},
		{"GrantLimitExponent", entitlements, `{"type":"quota","scope":{"service":"s"},"limit":1e3,"period":"day"}`, "limit"},
		{"GrantLimitString", entitlements, `{"type":"quota","scope":{"service":"s"},"limit":"5","period":"day"}`, "limit"},
		{"GrantPeriod", entitlements, `{"type":"quota","scope":{"service":"s"},"limit":5,"period":"year"}`, "period"},
		{"GrantType", entitlements, `{"type":"gift","scope":{"service":"s"}}`, "type"},
		{"GrantUnknown", entitlements, `{` + quota + `,"grant":{}}`, "grant"},
		{"GrantDuplicate", entitlements, `{` + quota + `,"limit":6}`, "limit"},
		{"GrantBalanceUnknown", entitlements, `{"type":"credits","scope":{"service":"s"},"balance":{"cents":1,"currency":"USD","x":1}}`, "balance.x"},
		{"GrantBalanceZero", entitlements, `{"type":"credits","scope":{"service":"s"},"balance":{"cents":0,"currency":"USD"}}`, "balance.cents"},
		{"GrantMetadataNotString", entitlements, `{` + quota + `,"metadata":{"k":1}}`, "metadata.k"},
		{"PaymentToolNotString", "/v1/payments", `{` + payment + `,"grant":{"type":"quota","scope":{"service":"s","tools":[1]},"limit":5,"period":"day"}}`, "grant.scope.tools[0]"},
		{"PaymentToolTooLong", "/v1/payments", `{` + payment + `,"grant":{"type":"quota","scope":{"service":"s","tools":["` + strings.Repeat("t", 201) + `"]},"limit":5,"period":"day"}}`, "grant.scope.tools[0]"},
		{"PaymentGrantUnknown", "/v1/payments", `{` + payment + `,"grant":{` + quota + `,"balance":{}}}`, "grant.balance"},
		{"PaymentAmountExponent", "/v1/payments", `{"agentId":"agent-a","amount":{"cents":1e2,"currency":"USD"},"provider":"manual","grant":{` + quota + `}}`, "amount.cents"},
		{"PaymentGrantLimitFraction", "/v1/payments", `{` + payment + `,"grant":{"type":"quota","scope":{"service":"s"},"limit":0.5,"period":"day"}}`, "grant.limit"},
		{"ConsumeCentsString", "/v1/consume", `{` + call + `,"cost":{"cents":"1","currency":"USD"}}`, "cost.cents"},
		{"ConsumeUnitsFraction", "/v1/consume", `{` + call + `,"units":1.5}`, "units"},
		{"ConsumeUnitsExponent", "/v1/consume", `{` + call + `,"units":1e3}`, "units"},
		{"ConsumeUnitsString", "/v1/consume", `{` + call + `,"units":"1"}`, "units"},
		{"ConsumeUnitsZero", "/v1/consume", `{` + call + `,"units":0}`, "units"},
		{"ConsumeUnitsNull", "/v1/consume", `{` + call + `,"units":null}`, "units"},
		{"ConsumeCostNull", "/v1/consume", `{` + call + `,"cost":null}`, "cost"},
		{"ConsumeAgentNull", "/v1/consume", `{"agentId":null,"service":"s","tool":"t","idempotencyKey":"k"}`, "agentId"},
		{"AuthorizeCentsString", "/v1/authorize", `{` + call + `,"maxCost":{"cents":"1","currency":"USD"}}`, "maxCost.cents"},
		{"AuthorizeMaxUnitsFraction", "/v1/authorize", `{` + call + `,"maxUnits":1.5}`, "maxUnits"},
		{"AuthorizeTTLExponent", "/v1/authorize", `{` + call + `,"ttlSeconds":6e1}`, "ttlSeconds"},
		{"AuthorizeTTLNull", "/v1/authorize", `{` + call + `,"ttlSeconds":null}`, "ttlSeconds"},
		{"AuthorizeCostIsNotAMember", "/v1/authorize", `{` + call + `,"cost":{"cents":1,"currency":"USD"}}`, "cost"},
		{"CaptureCostUnknown", "/v1/holds/h/capture", `{"agentId":"a","cost":{"cents":1,"currency":"USD","x":1}}`, "cost.x"},
		{"CaptureUnitsString", "/v1/holds/h/capture", `{"agentId":"a","units":"1"}`, "units"},
		{"CaptureAgentNull", "/v1/holds/h/capture", `{"agentId":null}`, "agentId"},
		{"ReleaseDuplicate", "/v1/holds/h/release", `{"agentId":"a","agentId":"b"}`, "agentId"},
		{"RefundUnitsFraction", "/v1/consumptions/c/refund", `{"units":1.5}`, "units"},
		{"RefundCurrencyLower", "/v1/consumptions/c/refund", `{"cost":{"cents":1,"currency":"usd"}}`, "cost.currency"},
		{"RefundUnknown", "/v1/consumptions/c/refund", `{"x":1}`, "x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := req{Method: "POST", Path: tt.path, Key: e.keys.Admin, Body: tt.body}
			switch tt.path {
			case "/v1/payments":
				r.Key, r.Header = e.keys.Billing, map[string]string{"Idempotency-Key": tt.name}
			case "/v1/consume":
				r.Key = e.keys.Host
			}
			wantField(t, e.must(http.StatusBadRequest, r), tt.field)
		})
	}
}

// TestInput_ReservedMetadataKeys: keys Firestore would refuse are refused
// by both stores' API alike, naming the field.
func TestInput_ReservedMetadataKeys(t *testing.T) {
	e := newEnv(t)
	for _, key := range []string{"__name__", "__x__", strings.Repeat("k", 257)} {
		wantField(t, e.must(http.StatusBadRequest, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing,
			Body: map[string]any{"metadata": map[string]string{key: "v"}}}), "metadata")
	}
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing,
		Body: map[string]any{"metadata": map[string]string{"__": "v", "_x_": "v", "plan": "pro"}}})
}

// TestInput_ServiceFilter: a service filter that is not printable ASCII is
// a 400 naming it, not a store round trip.
func TestInput_ServiceFilter(t *testing.T) {
	e := newEnv(t)
	for _, q := range []string{"%FF", "a%00b", "%E2%82%AC"} {
		wantField(t, e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/entitlements?service=" + q, Key: e.keys.Reader}), "service")
	}
}

// TestInput_ReaderCannotProbeOtherAgents: another agent's entitlement and
// receipt answer exactly like absent ones.
func TestInput_ReaderCannotProbeOtherAgents(t *testing.T) {
	e := newEnv(t)
	other := e.grantCredits(agentB, 10)
	for _, tc := range []struct{ path, missing string }{
		{"/v1/entitlements/" + other, "/v1/entitlements/no-such-id"},
	} {
		a := e.must(http.StatusNotFound, req{Method: "GET", Path: tc.path, Key: e.keys.Reader}).problem(t)
		b := e.must(http.StatusNotFound, req{Method: "GET", Path: tc.missing, Key: e.keys.Reader}).problem(t)
		if a.Type != b.Type || a.Title != b.Title || a.Detail != b.Detail {
			t.Errorf("another agent's document answers %+v, a missing one %+v: want the same", a, b)
		}
	}
	b := e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/receipts/no-such-id", Key: e.keys.Reader}).problem(t)
	if b.Detail != "receipt not found" {
		t.Errorf("missing receipt detail %q, want %q", b.Detail, "receipt not found")
	}
}

// TestMetrics_MethodLabelIsBounded: a made-up method does not make a new
// metric series.
func TestMetrics_MethodLabelIsBounded(t *testing.T) {
	e := newEnv(t)
	e.noSpec = true
	for _, m := range []string{"Q00001", "Q00002", "PROPFIND"} {
		e.do(req{Method: m, Path: "/healthz"})
	}
	body := string(e.must(http.StatusOK, req{Method: "GET", Path: "/metrics"}).Body)
	if strings.Contains(body, "Q0000") || strings.Contains(body, "PROPFIND") {
		t.Errorf("/metrics has a series per made-up method")
	}
	if !strings.Contains(body, `method="other"`) {
		t.Errorf(`/metrics lacks method="other"`)
	}
}

// TestInput_Limits: the limits the validator tags refer to hold at their
// bound and refuse one past it, naming the field and the bound.
func TestInput_Limits(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name, field string
		at, over    any
		bound       int64
	}{
		{"AgentID", "agentId", strings.Repeat("a", entitlement.MaxNameLen), strings.Repeat("a", entitlement.MaxNameLen+1), entitlement.MaxNameLen},
		{"Tool", "tool", strings.Repeat("t", entitlement.MaxNameLen), strings.Repeat("t", entitlement.MaxNameLen+1), entitlement.MaxNameLen},
		{"IdempotencyKey", "idempotencyKey", strings.Repeat("k", entitlement.MaxKeyLength), strings.Repeat("k", entitlement.MaxKeyLength+1), entitlement.MaxKeyLength},
		{"Units", "units", entitlement.MaxUnits, entitlement.MaxUnits + 1, entitlement.MaxUnits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := consumeBody(agentA, "k-limits", 1)
			body[tt.field] = tt.at
			e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: body})
			body[tt.field] = tt.over
			res := e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: body})
			wantField(t, res, tt.field)
			if p := res.problem(t); len(p.Errors) > 0 && !strings.Contains(p.Errors[0].Detail, strconv.FormatInt(tt.bound, 10)) {
				t.Errorf("%s past its bound: detail %q, want it to name %d", tt.field, p.Errors[0].Detail, tt.bound)
			}
		})
	}
	t.Run("HoldTTL", func(t *testing.T) {
		body := authorizeBody(agentA, "k-ttl", 1)
		body["ttlSeconds"] = int64(entitlement.MaxHoldTTL / time.Second)
		e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: body})
		body["ttlSeconds"] = int64(entitlement.MaxHoldTTL/time.Second) + 1
		res := e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: body})
		wantField(t, res, "ttlSeconds")
		if p := res.problem(t); len(p.Errors) > 0 && !strings.Contains(p.Errors[0].Detail, "86400") {
			t.Errorf("ttlSeconds past its bound: detail %q, want it to name 86400", p.Errors[0].Detail)
		}
	})
	t.Run("QuotaLimit", func(t *testing.T) {
		quota := func(limit int64) map[string]any {
			return map[string]any{"type": "quota", "scope": map[string]any{"service": "s"}, "limit": limit, "period": "day"}
		}
		path := "/v1/accounts/" + agentA + "/entitlements"
		e.must(http.StatusCreated, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: quota(api.MaxQuotaLimit)})
		wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: path, Key: e.keys.Admin, Body: quota(api.MaxQuotaLimit + 1)}), "limit")
	})
}
