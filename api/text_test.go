package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/payment"
)

// storeEnvs are the stores a rule that must hold on every store is tested
// on: memory, PostgreSQL and Firestore (the last two skip without their
// server, unless CI=true).
var storeEnvs = []struct {
	name string
	env  func(*testing.T) *env
}{
	{"Memory", func(t *testing.T) *env { return newEnv(t) }},
	{"Postgres", newPostgresEnv},
	{"Firestore", func(t *testing.T) *env { emulator.Host(t); return newFirestoreEnv(t) }},
}

// TestInput_NULRefused: U+0000 in a free-text member is a 400 naming the
// field on every store, and nothing is stored. PostgreSQL cannot store it
// in text (it answered 500) where memory and Firestore took it, so the rule
// is one, at the boundary, for every string of every body.
func TestInput_NULRefused(t *testing.T) {
	for _, st := range storeEnvs {
		t.Run(st.name, func(t *testing.T) {
			e := st.env(t)
			ent := e.grantCredits(agentA, 100)
			var ep struct{ ID string }
			e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: e.keys.Admin,
				Body: map[string]any{"url": "https://hooks.example/nul"}}).decode(t, &ep)
			account := "/v1/accounts/" + agentA
			payment := `"agentId":"agent-a","amount":{"cents":100,"currency":"USD"},"provider":"manual",` +
				`"grant":{"type":"credits","scope":{"service":"s"}}`
			for _, tc := range []struct {
				name, method, path, key, body, field string
				header                               map[string]string
			}{
				{"AccountDisplayName", "PUT", account, e.keys.Billing, `{"displayName":"a\u0000b"}`, "displayName", nil},
				{"AccountMetadataValue", "PUT", account, e.keys.Billing, `{"metadata":{"k":"v\u0000"}}`, "metadata.k", nil},
				{"AccountMetadataKey", "PUT", account, e.keys.Billing, `{"metadata":{"k\u0000":"v"}}`, "metadata", nil},
				{"GrantMetadata", "POST", account + "/entitlements", e.keys.Admin,
					`{"type":"credits","scope":{"service":"s"},"balance":{"cents":1,"currency":"USD"},"metadata":{"k":"\u0000"}}`, "metadata.k", nil},
				{"PatchMetadata", "PATCH", "/v1/entitlements/" + ent, e.keys.Admin, `{"metadata":{"k":"\u0000"}}`, "metadata.k", nil},
				{"PaymentDescription", "POST", "/v1/payments", e.keys.Billing, `{` + payment + `,"description":"top\u0000up"}`, "description",
					map[string]string{"Idempotency-Key": "nul-description"}},
				{"EndpointDisableReason", "POST", "/v1/webhook-endpoints/" + ep.ID + "/disable", e.keys.Admin, `{"reason":"\u0000"}`, "reason", nil},
			} {
				t.Run(tc.name, func(t *testing.T) {
					wantField(t, e.must(http.StatusBadRequest, req{Method: tc.method, Path: tc.path, Key: tc.key, Body: tc.body, Header: tc.header}), tc.field)
				})
			}
			var acct struct {
				DisplayName string
				Metadata    map[string]string
			}
			e.must(http.StatusOK, req{Method: "GET", Path: account, Key: e.keys.Admin}).decode(t, &acct)
			if acct.DisplayName != "" || len(acct.Metadata) != 0 {
				t.Errorf("account after refused writes: %+v, want nothing stored", acct)
			}
			var got struct{ Status string }
			e.must(http.StatusOK, req{Method: "GET", Path: "/v1/webhook-endpoints/" + ep.ID, Key: e.keys.Admin}).decode(t, &got)
			if got.Status == "disabled" {
				t.Errorf("endpoint after a refused disable: %+v, want it enabled", got)
			}
		})
	}
}

// TestStripe_NULIdentifiers: a signed Stripe event whose id, or an
// identifier of whose object, holds U+0000 is refused as malformed (400) on
// every store, before anything is granted: no Stripe object carries one,
// none can name a payment of Stipend's, and PostgreSQL answered 500 to
// them. The same payment then succeeds by a well-formed event.
func TestStripe_NULIdentifiers(t *testing.T) {
	for _, st := range storeEnvs {
		t.Run(st.name, func(t *testing.T) {
			e := st.env(t)
			var p payment.Payment
			e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Header: map[string]string{"Idempotency-Key": "nul-stripe"},
				Body: map[string]any{"agentId": agentA, "amount": map[string]any{"cents": 900, "currency": "USD"},
					"provider": "stripe", "providerIntentId": "pi_nul",
					"grant": map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}}}}).decode(t, &p)
			deliver := func(eventID, object string) response {
				id, _ := json.Marshal(eventID) // "\u0000" for U+0000
				payload := fmt.Sprintf(`{"id":%s,"object":"event","type":"payment_intent.succeeded","data":{"object":%s}}`, id, object)
				signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: []byte(payload), Secret: testStripeSecret})
				return e.do(req{Method: "POST", Path: "/v1/webhooks/stripe", Body: signed.Payload, Header: map[string]string{"Stripe-Signature": signed.Header}})
			}
			paid := `"amount_received":900,"currency":"usd"`
			for _, tc := range []struct{ name, eventID, object string }{
				{"EventID", "evt_nul\x00", `{"id":"pi_nul",` + paid + `}`},
				{"IntentID", "evt_nul_pi", `{"id":"pi_nul\u0000",` + paid + `}`},
				{"MetadataPaymentID", "evt_nul_meta", `{"id":"pi_nul",` + paid + `,"metadata":{"stipend_payment_id":"\u0000"}}`},
			} {
				if res := deliver(tc.eventID, tc.object); res.Status != http.StatusBadRequest {
					t.Errorf("%s holding U+0000: status %d, want 400; body %s", tc.name, res.Status, res.Body)
				}
			}
			if got, err := e.store.GetPayment(t.Context(), p.ID); err != nil || got.Status != payment.StatusPending {
				t.Fatalf("payment after refused events: %s, %v; want pending", got.Status, err)
			}
			if res := deliver("evt_nul_ok", `{"id":"pi_nul",`+paid+`}`); res.Status != http.StatusOK {
				t.Errorf("the well-formed event: status %d, want 200; body %s", res.Status, res.Body)
			}
			if got, err := e.store.GetPayment(t.Context(), p.ID); err != nil || got.Status != payment.StatusSucceeded {
				t.Errorf("payment after the well-formed event: %s, %v; want succeeded", got.Status, err)
			}
		})
	}
}
