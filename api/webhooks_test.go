package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

const stripeTestSecret = "whsec_api_stripe_test"

func newWebhookEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, func(c *api.Config) { c.Webhooks = &api.WebhookConfig{StripeSecret: stripeTestSecret} })
}

func TestWebhooks_Endpoints(t *testing.T) {
	e := newWebhookEnv(t)
	admin := e.keys.Admin
	res := e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: admin,
		Body: map[string]any{"url": "https://hooks.example/stipend", "eventTypes": []string{"payment.succeeded"}}})
	var created struct {
		ID, URL, Secret string
		EventTypes      []string
		Disabled        bool
	}
	res.decode(t, &created)
	if created.ID == "" || !strings.HasPrefix(created.Secret, "whsec_") || created.URL != "https://hooks.example/stipend" {
		t.Fatalf("created endpoint = %+v; want an id, the url and a whsec_ secret", created)
	}
	// The secret is shown once: neither the list nor a get shows it.
	for _, path := range []string{"/v1/webhook-endpoints", "/v1/webhook-endpoints/" + created.ID} {
		res = e.must(http.StatusOK, req{Method: "GET", Path: path, Key: admin})
		if strings.Contains(string(res.Body), created.Secret) || strings.Contains(string(res.Body), `"secret"`) {
			t.Errorf("GET %s shows the secret: %s", path, res.Body)
		}
	}
	res = e.must(http.StatusOK, req{Method: "POST", Path: "/v1/webhook-endpoints/" + created.ID + "/disable", Key: admin,
		Body: map[string]any{"reason": "rotating"}})
	var disabled struct {
		Disabled       bool
		DisabledReason string
	}
	res.decode(t, &disabled)
	if !disabled.Disabled || disabled.DisabledReason != "rotating" {
		t.Errorf("disabled endpoint = %+v, want disabled with the reason", disabled)
	}
	e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/webhook-endpoints/nope/disable", Key: admin})

	for _, tc := range []struct {
		body  string
		field string
	}{
		{`{"url":"ftp://x.example"}`, "url"},
		{`{"url":"https://x.example","eventTypes":["nope"]}`, "eventTypes[0]"},
		{`{"eventTypes":[]}`, "url"},
		{`{"url":"https://x.example","extra":1}`, "extra"},
	} {
		p := e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: admin, Body: tc.body}).problem(t)
		if len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("POST %s: errors %+v, want field %q", tc.body, p.Errors, tc.field)
		}
	}
	for _, k := range []string{e.keys.Billing, e.keys.Host, e.keys.Reader} {
		e.must(http.StatusForbidden, req{Method: "GET", Path: "/v1/webhook-endpoints", Key: k})
	}
	e.must(http.StatusUnauthorized, req{Method: "POST", Path: "/v1/webhook-endpoints", Body: `{"url":"https://x.example"}`})
}

func TestWebhooks_Deliveries(t *testing.T) {
	e := newWebhookEnv(t)
	admin := e.keys.Admin
	ds := e.store.(store.DeliveryStore)
	ctx := context.Background()
	d, _, err := ds.EnqueueDelivery(ctx, store.Delivery{ID: "d1", Key: "k1", EndpointID: "ep", EventID: "ev1",
		EventType: "payment.succeeded", Payload: []byte(`{}`)})
	if err != nil {
		t.Fatalf("EnqueueDelivery: %v", err)
	}
	var list api.List[store.Delivery]
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/deliveries?status=pending&eventType=payment.succeeded", Key: admin}).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != d.ID {
		t.Errorf("GET /v1/deliveries?status=pending = %+v, want [%s]", list.Items, d.ID)
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/deliveries?status=dead", Key: admin}).decode(t, &list)
	if len(list.Items) != 0 {
		t.Errorf("GET /v1/deliveries?status=dead = %d items, want 0", len(list.Items))
	}
	for _, q := range []string{"status=lost", "eventType=nope", "limit=0", "cursor=garbage"} {
		p := e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/deliveries?" + q, Key: admin}).problem(t)
		if want := strings.Split(q, "=")[0]; len(p.Errors) == 0 || p.Errors[0].Field != want {
			t.Errorf("GET /v1/deliveries?%s: errors %+v, want field %q", q, p.Errors, want)
		}
	}

	// Retry: a pending delivery cannot be retried; a dead one can.
	e.must(http.StatusConflict, req{Method: "POST", Path: "/v1/deliveries/d1/retry", Key: admin})
	e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/deliveries/nope/retry", Key: admin})
	claimed, err := ds.ClaimDueDeliveries(ctx, e.clock.Now(), 1, time.Minute, "w")
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimDueDeliveries = %d, %v", len(claimed), err)
	}
	if _, err := ds.FinishDelivery(ctx, "d1", claimed[0].ClaimToken, store.AttemptResult{Status: store.DeliveryDead}); err != nil {
		t.Fatalf("FinishDelivery: %v", err)
	}
	var retried store.Delivery
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/deliveries/d1/retry", Key: admin}).decode(t, &retried)
	if retried.Status != store.DeliveryPending {
		t.Errorf("retried delivery status = %s, want pending", retried.Status)
	}
	e.must(http.StatusForbidden, req{Method: "POST", Path: "/v1/deliveries/d1/retry", Key: e.keys.Billing})
}

func TestWebhooks_Stripe(t *testing.T) {
	e := newWebhookEnv(t)
	res := e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing,
		Header: map[string]string{"Idempotency-Key": "stripe-1"},
		Body: map[string]any{"agentId": agentA, "amount": map[string]any{"cents": 900, "currency": "USD"},
			"provider": "stripe", "providerIntentId": "pi_api_1",
			"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}}}})
	var p payment.Payment
	res.decode(t, &p)

	payload := []byte(`{"id":"evt_api_1","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_api_1","amount_received":900,"currency":"usd"}}}`)
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: payload, Secret: stripeTestSecret})
	send := func(sig string) response {
		return e.do(req{Method: "POST", Path: "/v1/webhooks/stripe", Body: payload, Header: map[string]string{"Stripe-Signature": sig}})
	}
	if got := send("t=1,v1=00"); got.Status != http.StatusBadRequest {
		t.Errorf("a bad signature: status %d, want 400", got.Status)
	}
	for range 2 { // the second is Stripe redelivering
		if got := send(signed.Header); got.Status != http.StatusOK {
			t.Fatalf("a signed event: status %d, want 200; body %s", got.Status, got.Body)
		}
	}
	got, err := e.store.GetPayment(context.Background(), p.ID)
	if err != nil || got.Status != payment.StatusSucceeded || len(got.EntitlementIDs) != 1 {
		t.Errorf("payment after the event: %s with %d entitlements, %v; want succeeded with 1", got.Status, len(got.EntitlementIDs), err)
	}

	off := newEnv(t, func(c *api.Config) { c.Webhooks = &api.WebhookConfig{} })
	if got := off.do(req{Method: "POST", Path: "/v1/webhooks/stripe", Body: payload, Header: map[string]string{"Stripe-Signature": signed.Header}}); got.Status != http.StatusServiceUnavailable {
		t.Errorf("without a Stripe secret: status %d, want 503", got.Status)
	}
}
