package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
)

// TestIdempotencyKey_OneRule: POST /v1/payments (whose key is the
// payment's own) and the ledger's routes read the Idempotency-Key header by
// one rule: the same header gets the same answer on both, the quoted form
// names the same key as the bare one, and a refusal names the header.
func TestIdempotencyKey_OneRule(t *testing.T) {
	e := newEnvWith(t, memledger.New("api-test"))
	grant := "/v1/accounts/" + agentA + "/entitlements"
	send := func(path string, values ...string) response {
		t.Helper()
		r := req{Method: "POST", Path: path, Key: e.keys.Admin, Body: grantBody(5)}
		if path == "/v1/payments" {
			r.Body = paymentBody(agentA, 5)
		}
		if values != nil {
			r.Values = http.Header{idempotency.HeaderKey: values}
		}
		return e.do(r)
	}
	for _, tt := range []struct {
		name   string
		values []string
		kind   problem.Kind
	}{
		{"Missing", nil, problem.IdempotencyKeyMissing},
		{"Empty", []string{""}, problem.IdempotencyKeyInvalid},
		{"Quote", []string{`k"1`}, problem.IdempotencyKeyInvalid},
		{"Backslash", []string{`k\1`}, problem.IdempotencyKeyInvalid},
		{"TooLong", []string{strings.Repeat("k", idempotency.MaxKeyLen+1)}, problem.IdempotencyKeyInvalid},
		{"Twice", []string{"k1", "k2"}, problem.IdempotencyKeyInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var got []problem.Problem
			for _, path := range []string{"/v1/payments", grant} {
				res := send(path, tt.values...)
				if res.Status != http.StatusBadRequest {
					t.Fatalf("POST %s with %s %q: status %d, want 400; body %s", path, idempotency.HeaderKey, tt.values, res.Status, res.Body)
				}
				p := res.problem(t)
				if p.Type != tt.kind.URI() || len(p.Errors) != 1 || p.Errors[0].Field != idempotency.HeaderKey {
					t.Errorf("POST %s with %s %q: %+v, want %s naming %s", path, idempotency.HeaderKey, tt.values, p, tt.kind, idempotency.HeaderKey)
				}
				got = append(got, p)
			}
			if diff := cmp.Diff(got[0], got[1], cmpopts.IgnoreFields(problem.Problem{}, "RequestID")); diff != "" {
				t.Errorf("payments and the ledger answer differently (-payments +ledger):\n%s", diff)
			}
		})
	}
	t.Run("QuotedIsTheSameKey", func(t *testing.T) {
		var first, again payment.Payment
		e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: paymentBody(agentA, 7),
			Header: map[string]string{idempotency.HeaderKey: "pay-q"}}).decode(t, &first)
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: paymentBody(agentA, 7),
			Header: map[string]string{idempotency.HeaderKey: `"pay-q"`}}).decode(t, &again)
		if again.ID != first.ID {
			t.Errorf(`payment with key "pay-q" = %s, with pay-q %s: want one payment`, again.ID, first.ID)
		}
		e.must(http.StatusCreated, req{Method: "POST", Path: grant, Key: e.keys.Admin, Body: grantBody(5), Header: map[string]string{idempotency.HeaderKey: `"g-q"`}})
		res := e.must(http.StatusCreated, req{Method: "POST", Path: grant, Key: e.keys.Admin, Body: grantBody(5), Header: map[string]string{idempotency.HeaderKey: "g-q"}})
		if res.Header.Get(idempotency.HeaderReplayed) != "true" {
			t.Errorf(`grant with key g-q after "g-q": not replayed`)
		}
	})
}

// TestBodyTooLarge_OneAnswer: a body over the limit gets the same 413 from
// the ledger (which reads the body first) as from any other route.
func TestBodyTooLarge_OneAnswer(t *testing.T) {
	e := newEnv(t)
	big := `{"agentId":"` + strings.Repeat("a", api.DefaultBodyLimit) + `"}`
	var got []problem.Problem
	for _, r := range []req{
		{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: big},
		{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin, Body: big},
	} {
		got = append(got, e.must(http.StatusRequestEntityTooLarge, r).problem(t))
	}
	if diff := cmp.Diff(got[0], got[1], cmpopts.IgnoreFields(problem.Problem{}, "RequestID")); diff != "" {
		t.Errorf("413 of a route and of the ledger differ (-route +ledger):\n%s", diff)
	}
	if want := problem.TooLarge(api.DefaultBodyLimit); got[1].Detail != want.Detail {
		t.Errorf("ledger's 413 detail %q, want %q", got[1].Detail, want.Detail)
	}
}
