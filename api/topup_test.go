package api_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/stripepay"
	"github.com/stipend-mcp/stipend/topup"
)

func topUpPath(agent string) string { return "/v1/accounts/" + agent + "/topup" }

// topUpBody is a valid PUT body: below 500 USD cents, buy 1000, at most 3000 a day.
func topUpBody() map[string]any {
	return map[string]any{"threshold": usd(500), "amount": usd(1000), "dailyCap": usd(3000),
		"scope": map[string]any{"service": "search"}}
}

// saveMethod saves a Stripe method for agent's top-up, as a Checkout made
// with saveForTopUp does when it succeeds.
func (e *env) saveMethod(agent string) {
	e.t.Helper()
	if _, err := e.store.SaveTopUpMethod(context.Background(), agent, topup.Method{Customer: "cus_test", PaymentMethod: "pm_card_visa"}); err != nil {
		e.t.Fatalf("SaveTopUpMethod: %v", err)
	}
}

// exerciseTopUpRoutes answers each top-up route with success and its
// refusals, for TestOpenAPI_Responses.
func exerciseTopUpRoutes(t *testing.T, seen *sync.Map) {
	e := newEnv(t)
	e.seen = seen
	billing := e.keys.Billing
	e.must(http.StatusNotFound, req{Method: "GET", Path: topUpPath("nobody"), Key: billing})
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: billing})
	e.must(http.StatusConflict, req{Method: "PUT", Path: topUpPath(agentA), Key: billing, Body: topUpBody()})
	e.saveMethod(agentA)
	e.must(http.StatusOK, req{Method: "PUT", Path: topUpPath(agentA), Key: billing, Body: topUpBody()})
	e.must(http.StatusOK, req{Method: "GET", Path: topUpPath(agentA), Key: billing})
	e.must(http.StatusOK, req{Method: "DELETE", Path: topUpPath(agentA), Key: e.keys.Admin})
	e.must(http.StatusBadRequest, req{Method: "PUT", Path: topUpPath(agentA), Key: billing, Body: `{"threshold":1}`})
	e.must(http.StatusForbidden, req{Method: "GET", Path: topUpPath(agentA), Key: e.keys.Host})
}

func TestTopUp_Routes(t *testing.T) {
	e := newEnv(t)
	billing := e.keys.Billing
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: billing})
	var got topup.TopUp
	e.must(http.StatusOK, req{Method: "GET", Path: topUpPath(agentA), Key: billing}).decode(t, &got)
	if got.Enabled || got.Settings != nil || got.AgentID != agentA {
		t.Errorf("GET never set = %+v, want disabled, no settings", got)
	}
	p := e.must(http.StatusConflict, req{Method: "PUT", Path: topUpPath(agentA), Key: billing, Body: topUpBody()}).problem(t)
	if !strings.Contains(p.Detail, "saveForTopUp") {
		t.Errorf("PUT without a method: detail %q, want it to say a Checkout with saveForTopUp saves one", p.Detail)
	}
	e.saveMethod(agentA)
	e.must(http.StatusOK, req{Method: "PUT", Path: topUpPath(agentA), Key: billing, Body: topUpBody()}).decode(t, &got)
	if !got.Enabled || got.Settings == nil || got.Settings.Threshold.Cents != 500 || got.Method == nil || got.Method.Customer != "cus_test" {
		t.Errorf("PUT = %+v, want enabled with a threshold of 500 and the saved customer", got)
	}
	e.must(http.StatusOK, req{Method: "DELETE", Path: topUpPath(agentA), Key: billing}).decode(t, &got)
	if got.Enabled || got.DisabledReason == "" || got.Settings == nil {
		t.Errorf("DELETE = %+v, want disabled with a reason, settings kept", got)
	}
	e.must(http.StatusForbidden, req{Method: "PUT", Path: topUpPath(agentA), Key: e.keys.Reader, Body: topUpBody()})
}

func TestTopUp_BadInput(t *testing.T) {
	e := newEnv(t)
	e.saveMethod(agentA)
	with := func(k string, v any) map[string]any {
		b := topUpBody()
		if v == nil {
			delete(b, k)
		} else {
			b[k] = v
		}
		return b
	}
	for _, tt := range []struct {
		name  string
		body  any
		field string
	}{
		{"ThresholdCurrency", with("threshold", map[string]any{"cents": 500, "currency": "EUR"}), "threshold.currency"},
		{"CapCurrency", with("dailyCap", map[string]any{"cents": 5000, "currency": "EUR"}), "dailyCap.currency"},
		{"BelowStripeMinimum", with("amount", usd(20)), "amount.cents"},
		{"CapBelowAmount", with("dailyCap", usd(999)), "dailyCap.cents"},
		{"NoAmount", with("amount", nil), "amount"},
		{"NoScope", with("scope", nil), "scope"},
		{"UnknownField", with("maxPerDay", 3), "maxPerDay"},
		{"ZeroThreshold", with("threshold", usd(0)), "threshold.cents"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := e.with(t).must(http.StatusBadRequest, req{Method: "PUT", Path: topUpPath(agentA), Key: e.keys.Billing, Body: tt.body}).problem(t)
			if len(p.Errors) == 0 || p.Errors[0].Field != tt.field {
				t.Errorf("errors = %+v, want the field %s named", p.Errors, tt.field)
			}
		})
	}
}

// topUpEnv is a server with Stripe at url and auto top-up, whose worker
// runs until the test ends.
func topUpEnv(t *testing.T, url string) (*env, *stripepay.TopUps) {
	t.Helper()
	client := stripemock.Client(t, url)
	var tu *stripepay.TopUps
	e := newEnv(t, func(c *api.Config) {
		c.Stripe = client
		tu = &stripepay.TopUps{Store: c.Store, Stripe: client, Now: c.Now,
			Applier: &stripepay.Applier{Payments: c.Store, Issuer: "stipend-test", Sign: nil}}
		c.TopUps = tu
	})
	tu.Applier.Sign = e.signer.Sign
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tu.Run(ctx, 10*time.Second); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, tu
}

// waitTopUp waits until agent's top-up has begun seq top-ups and none is
// pending, and returns it.
func waitTopUp(t *testing.T, e *env, agent string, seq int64) topup.TopUp {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := e.store.GetTopUp(context.Background(), agent)
		if err != nil {
			t.Fatalf("GetTopUp: %v", err)
		}
		if got.Seq >= seq && got.PendingPaymentID == "" {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("top-up of %s = %+v after 30 s, want %d begun and settled", agent, got, seq)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTopUp_AfterConsume: a consume that brings the account's credits below
// the threshold makes one off-session PaymentIntent at stripe-mock (its
// answer patched to succeeded), whose success grants the top-up's credits.
func TestTopUp_AfterConsume(t *testing.T) {
	base := stripemock.URL(t)
	url, requests := stripemock.Recording(t, stripemock.Patched(t, base, map[string]any{"status": "succeeded", "amount_received": 1000, "currency": "usd"}))
	e, _ := topUpEnv(t, url)
	e.grantCredits(agentA, 800)
	e.saveMethod(agentA)
	e.must(http.StatusOK, req{Method: "PUT", Path: topUpPath(agentA), Key: e.keys.Billing, Body: topUpBody()})
	e.consume("above", 200) // 600 left: no top-up
	e.consume("below", 200) // 400 left: below 500
	got := waitTopUp(t, e, agentA, 1)
	if got.Failures != 0 || got.Seq != 1 {
		t.Errorf("top-up = %+v, want one, succeeded", got)
	}
	p, err := e.store.GetPayment(context.Background(), topup.PaymentID(agentA, 1))
	if err != nil || p.Status != payment.StatusSucceeded || len(p.EntitlementIDs) != 1 || p.ReceiptID == "" {
		t.Fatalf("top-up payment = %+v, %v; want succeeded with its grant and receipt", p, err)
	}
	var intents []stripemock.Request
	for _, r := range requests() {
		if r.Method == "POST" && r.Path == "/v1/payment_intents" {
			intents = append(intents, r)
		}
	}
	if len(intents) != 1 {
		t.Fatalf("PaymentIntents made = %d, want 1", len(intents))
	}
	f := intents[0].Form
	if f.Get("off_session") != "true" || f.Get("confirm") != "true" || f.Get("customer") != "cus_test" || f.Get("payment_method") != "pm_card_visa" ||
		f.Get("amount") != "1000" || f.Get("metadata["+payment.MetadataKey+"]") != p.ID || f.Get("metadata["+stripepay.TopUpMetadataKey+"]") != "true" {
		t.Errorf("PaymentIntent form = %v, want off-session, confirmed, the saved customer and method, 1000, the payment in metadata", f)
	}
	if intents[0].IdempotencyKey == "" {
		t.Error("PaymentIntent sent without an Idempotency-Key")
	}
	// Above the threshold again (1400 available): the next consume makes none.
	e.consume("after", 100)
	if got := waitTopUp(t, e, agentA, 1); got.Seq != 1 {
		t.Errorf("top-ups after a consume above the threshold = %d, want 1", got.Seq)
	}
}
