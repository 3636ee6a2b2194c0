package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/problem"
)

func TestConsume(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)

	var first struct {
		Result      string
		Consumption entitlement.Consumption
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 30)}).decode(t, &first)
	if first.Result != "consumed" || first.Consumption.EntitlementID != id || first.Consumption.BalanceAfter.Cents != 70 {
		t.Fatalf("consume: got %+v, want consumed from %s leaving 70", first, id)
	}

	t.Run("Replay", func(t *testing.T) {
		var again struct {
			Result      string
			Consumption entitlement.Consumption
		}
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 30)}).decode(t, &again)
		if again.Result != "replay" {
			t.Errorf("result = %q, want replay", again.Result)
		}
		if diff := cmp.Diff(first.Consumption, again.Consumption); diff != "" {
			t.Errorf("replayed consumption differs (-first +replay):\n%s", diff)
		}
		if got := e.balance(id); got != 70 {
			t.Errorf("balance after replay = %d, want 70", got)
		}
	})

	t.Run("ConflictIs422", func(t *testing.T) {
		p := e.must(http.StatusUnprocessableEntity, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 31)}).problem(t)
		if p.Type != problem.IdempotencyKeyReused.URI() {
			t.Errorf("type = %q", p.Type)
		}
		if got := e.balance(id); got != 70 {
			t.Errorf("balance after conflict = %d, want 70", got)
		}
	})

	t.Run("DeniedIs402WithReasons", func(t *testing.T) {
		p := e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k2", 71)}).problem(t)
		want := []entitlement.Denial{{EntitlementID: id, Reason: entitlement.ReasonInsufficientBalance}}
		if diff := cmp.Diff(want, p.Reasons); diff != "" {
			t.Errorf("reasons (-want +got):\n%s", diff)
		}
		if p.Status != 402 || p.Title == "" || p.Detail == "" || p.RequestID == "" {
			t.Errorf("problem lacks members: %+v", p)
		}
	})

	t.Run("UnknownAgentIs402NotFound", func(t *testing.T) {
		p := e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody("nobody", "k", 1)}).problem(t)
		if len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonNotFound {
			t.Errorf("reasons = %+v, want one not_found", p.Reasons)
		}
	})

	t.Run("CheckConsumesNothing", func(t *testing.T) {
		var out struct {
			Result      string
			Entitlement entitlement.Entitlement
		}
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: consumeBody(agentA, "k3", 70)}).decode(t, &out)
		if out.Result != "allowed" || out.Entitlement.ID != id {
			t.Errorf("check: got %+v, want allowed by %s", out, id)
		}
		if got := e.balance(id); got != 70 {
			t.Errorf("balance after check = %d, want 70", got)
		}
		e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: consumeBody(agentA, "k3", 71)})
	})
}

// TestConsume_BadInput: bad input is a 400 naming the field, and nothing is consumed.
func TestConsume_BadInput(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits(agentA, 100)
	valid := `"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k"`
	tests := []struct {
		name, body, field string
	}{
		{"UnknownField", `{` + valid + `,"cost":{"cents":1,"currency":"USD"},"extra":1}`, "extra"},
		{"UnknownMoneyField", `{` + valid + `,"cost":{"cents":1,"currency":"USD","x":1}}`, "cost.x"},
		{"FloatCents", `{` + valid + `,"cost":{"cents":1.5,"currency":"USD"}}`, "cost.cents"},
		{"ExponentCents", `{` + valid + `,"cost":{"cents":1e2,"currency":"USD"}}`, "cost.cents"},
		{"StringCents", `{` + valid + `,"cost":{"cents":"1","currency":"USD"}}`, "cost.cents"},
		{"CentsBeyondMaxSafe", `{` + valid + `,"cost":{"cents":9007199254740992,"currency":"USD"}}`, "cost.cents"},
		{"NegativeCents", `{` + valid + `,"cost":{"cents":-5,"currency":"USD"}}`, "cost.cents"},
		{"BadCurrency", `{` + valid + `,"cost":{"cents":1,"currency":"usd"}}`, "cost.currency"},
		{"LongKey", `{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"` + strings.Repeat("k", 300) + `","cost":{"cents":1,"currency":"USD"}}`, "idempotencyKey"},
		{"MissingService", `{"agentId":"agent-a","tool":"web","idempotencyKey":"k","cost":{"cents":1,"currency":"USD"}}`, "service"},
		{"WrongTypeUnits", `{` + valid + `,"units":"2","cost":{"cents":1,"currency":"USD"}}`, "units"},
		{"FloatUnits", `{` + valid + `,"units":2.0,"cost":{"cents":1,"currency":"USD"}}`, "units"},
		{"DuplicateKey", `{` + valid + `,"tool":"other","cost":{"cents":1,"currency":"USD"}}`, "tool"},
		{"Trailing", `{` + valid + `,"cost":{"cents":1,"currency":"USD"}} {}`, ""},
		{"Truncated", `{` + valid + `,"cost":{"cents":1,`, "cost"},
		{"NotAnObject", `[1,2]`, ""},
		{"NullService", `{"agentId":"agent-a","service":null,"tool":"web","idempotencyKey":"k"}`, "service"},
		{"ControlCharInKey", `{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"a\nb"}`, "idempotencyKey"},
		{"AnyServiceRefused", `{"agentId":"agent-a","service":"*","tool":"web","idempotencyKey":"k"}`, "service"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: tt.body}).problem(t)
			if len(p.Errors) == 0 || p.Errors[0].Field != tt.field {
				t.Errorf("errors = %+v, want first field %q", p.Errors, tt.field)
			}
			if p.Type != problem.InvalidRequest.URI() {
				t.Errorf("type = %q", p.Type)
			}
		})
	}
	if got := e.balance(id); got != 100 {
		t.Errorf("balance after bad requests = %d, want 100 (nothing consumed)", got)
	}
	var list struct{ Items []entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/agent-a/consumptions", Key: e.keys.Admin}).decode(t, &list)
	if len(list.Items) != 0 {
		t.Errorf("consumptions after bad requests = %d, want 0", len(list.Items))
	}
}

func TestConsume_MediaTypeAndSize(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.BodyLimit = 256 })
	res := e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k", 1),
		Header: map[string]string{"Content-Type": "text/plain"}})
	if res.Status != http.StatusUnsupportedMediaType || res.problem(t).Errors[0].Field != "Content-Type" {
		t.Errorf("text/plain: status %d body %s, want 415 naming Content-Type", res.Status, res.Body)
	}
	big := consumeBody(agentA, strings.Repeat("k", 250), 1)
	big["tool"] = strings.Repeat("t", 100)
	res = e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: big})
	if res.Status != http.StatusRequestEntityTooLarge {
		t.Errorf("oversize: status %d body %s, want 413", res.Status, res.Body)
	}
	if p := res.problem(t); len(p.Errors) != 1 {
		t.Errorf("oversize: errors = %+v, want one naming the body", p.Errors)
	}
}
