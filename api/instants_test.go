package api_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
)

// zeroInstant is Go's zero time.Time as JSON: a client that sends it for
// "none" must hear that it is an instant, and a past one.
const zeroInstant = "0001-01-01T00:00:00Z"

// subscriptionOf decodes the subscription member of an entitlement as raw
// members, so a test sees what the JSON holds, not what a Go type defaults.
func subscriptionOf(tb testing.TB, body []byte) map[string]json.RawMessage {
	tb.Helper()
	var e struct {
		Subscription map[string]json.RawMessage `json:"subscription"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		tb.Fatalf("entitlement %s: %v", body, err)
	}
	return e.Subscription
}

// TestGrant_Instants: an instant given is honoured as given, one that is not
// later than now is refused (400 naming the member), and an absent one stays
// absent on the entitlement and its receipt.
func TestGrant_Instants(t *testing.T) {
	e := newEnv(t)
	now := e.clock.Now()
	grant := func(e *env, member string, at any) response {
		b := map[string]any{"type": "subscription", "scope": map[string]any{"service": "search"}}
		if member != "" {
			b[member] = at
		}
		return e.do(req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin, Body: b})
	}

	t.Run("NotLaterThanNowIs400", func(t *testing.T) {
		for _, member := range []string{"expiresAt", "validUntil"} {
			for _, at := range []string{zeroInstant, now.Add(-time.Second).Format(time.RFC3339Nano), now.Format(time.RFC3339Nano)} {
				res := grant(e.with(t), member, at)
				if res.Status != http.StatusBadRequest || res.problem(t).Errors[0].Field != member {
					t.Errorf("grant with %s %s: status %d body %s, want 400 naming %s", member, at, res.Status, res.Body, member)
				}
			}
		}
		b := paymentBody(agentA, 500)
		b["grant"] = map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}, "expiresAt": zeroInstant}
		if res := e.createPayment("pay-zero", b); res.Status != http.StatusBadRequest || res.problem(t).Errors[0].Field != "grant.expiresAt" {
			t.Errorf("payment with grant.expiresAt %s: status %d body %s, want 400 naming grant.expiresAt", zeroInstant, res.Status, res.Body)
		}
	})

	t.Run("OmittedValidUntilStaysAbsent", func(t *testing.T) {
		res := grant(e.with(t), "", nil)
		if res.Status != http.StatusCreated {
			t.Fatalf("grant without validUntil: status %d body %s, want 201", res.Status, res.Body)
		}
		if sub := subscriptionOf(t, res.Body); sub["validUntil"] != nil || sub["validFrom"] == nil {
			t.Errorf("granted subscription %s: want validFrom and no validUntil", res.Body)
		}
		var g entitlement.Entitlement
		res.decode(t, &g)
		got := e.must(http.StatusOK, req{Method: "GET", Path: "/v1/entitlements/" + g.ID, Key: e.keys.Admin})
		if sub := subscriptionOf(t, got.Body); sub["validUntil"] != nil {
			t.Errorf("GET subscription %s: want no validUntil", got.Body)
		}
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host,
			Body: map[string]any{"agentId": agentA, "service": "search", "tool": "web", "idempotencyKey": "sub-forever"}})
	})

	t.Run("OmittedValidUntilOnPaymentAndReceipt", func(t *testing.T) {
		b := paymentBody(agentB, 900)
		b["grant"] = map[string]any{"type": "subscription", "scope": map[string]any{"service": "search"}}
		var p payment.Payment
		e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: b,
			Header: map[string]string{"Idempotency-Key": "pay-sub"}}).decode(t, &p)
		res := e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing})
		var out struct {
			Entitlements []json.RawMessage `json:"entitlements"`
			Receipt      struct {
				Grants []map[string]json.RawMessage `json:"grants"`
			} `json:"receipt"`
		}
		res.decode(t, &out)
		if len(out.Entitlements) != 1 || len(out.Receipt.Grants) != 1 {
			t.Fatalf("succeed: %s; want one entitlement and one receipt grant", res.Body)
		}
		if sub := subscriptionOf(t, out.Entitlements[0]); sub["validUntil"] != nil {
			t.Errorf("granted subscription %s: want no validUntil", out.Entitlements[0])
		}
		if out.Receipt.Grants[0]["validUntil"] != nil {
			t.Errorf("receipt grant %v: want no validUntil", out.Receipt.Grants[0])
		}
	})

	t.Run("GivenInstantHonoured", func(t *testing.T) {
		e := newEnv(t)
		until := e.clock.Now().Add(time.Hour)
		var g entitlement.Entitlement
		res := grant(e.with(t), "validUntil", until.Format(time.RFC3339))
		if res.Status != http.StatusCreated {
			t.Fatalf("grant until %v: status %d body %s, want 201", until, res.Status, res.Body)
		}
		res.decode(t, &g)
		if g.Subscription.ValidUntil == nil || !g.Subscription.ValidUntil.Equal(until) {
			t.Fatalf("validUntil %v, want %v", g.Subscription.ValidUntil, until)
		}
		consume := func(key string) response {
			return e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host,
				Body: map[string]any{"agentId": agentA, "service": "search", "tool": "web", "idempotencyKey": key}})
		}
		e.clock.Set(until.Add(-time.Nanosecond))
		if res := consume("just-before"); res.Status != http.StatusOK {
			t.Errorf("consume 1 ns before validUntil: status %d body %s, want 200", res.Status, res.Body)
		}
		e.clock.Set(until)
		res = consume("at-the-end")
		if res.Status != http.StatusPaymentRequired {
			t.Fatalf("consume at validUntil: status %d body %s, want 402", res.Status, res.Body)
		}
		if p := res.problem(t); len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonExpired {
			t.Errorf("consume at validUntil: reasons %v, want [expired]", p.Reasons)
		}
	})

	t.Run("PaymentGrantPassedBeforeSuccess", func(t *testing.T) {
		e := newEnv(t)
		expires := e.clock.Now().Add(time.Hour)
		b := paymentBody(agentA, 500)
		b["grant"] = map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}, "expiresAt": expires}
		var p payment.Payment
		e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: b,
			Header: map[string]string{"Idempotency-Key": "pay-late"}}).decode(t, &p)
		e.clock.Advance(2 * time.Hour)
		// A retry of the creation answers the payment, though its grant's
		// instant has passed since.
		var again payment.Payment
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: b,
			Header: map[string]string{"Idempotency-Key": "pay-late"}}).decode(t, &again)
		if again.ID != p.ID {
			t.Errorf("retried creation: payment %s, want %s", again.ID, p.ID)
		}
		if res := e.createPayment("pay-late-new", b); res.Status != http.StatusBadRequest {
			t.Errorf("a new payment with the passed grant.expiresAt: status %d body %s, want 400", res.Status, res.Body)
		}
		var out completionBody
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing}).decode(t, &out)
		if len(out.Entitlements) != 1 || out.Entitlements[0].ExpiresAt == nil || !out.Entitlements[0].ExpiresAt.Equal(expires) {
			t.Fatalf("succeed: entitlements %+v, want one expiring at %v", out.Entitlements, expires)
		}
		if g := out.Receipt.Grants; len(g) != 1 || g[0].ExpiresAt == nil || !g[0].ExpiresAt.Equal(expires) {
			t.Errorf("receipt grants %+v, want one expiring at %v", g, expires)
		}
		res := e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "after", 1)})
		if res.Status != http.StatusPaymentRequired || res.problem(t).Type != problem.PaymentRequired.URI() {
			t.Fatalf("consume from an entitlement granted expired: status %d body %s, want 402", res.Status, res.Body)
		}
		if p := res.problem(t); len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonExpired {
			t.Errorf("consume from an entitlement granted expired: reasons %v, want [expired]", p.Reasons)
		}
	})
}
