package api_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// readerAccess says how a route treats reader keys.
type readerAccess int

const (
	readerNever   readerAccess = iota // 403 for every reader
	readerByAgent                     // the :agentId must be listed, else 403
	readerByOwner                     // the document's agent must be listed, else 404
	public                            // no key needed
)

// route is one row of the authorization matrix.
type route struct {
	method, path string
	body         any
	header       map[string]string
	roles        []apikey.Role // besides admin
	reader       readerAccess
	ok           []int // statuses a permitted caller may get
}

// routeTable returns every route of the service with a valid request,
// against the fixtures of setupFixtures.
func routeTable(f fixtures) []route {
	billing := []apikey.Role{apikey.RoleBilling}
	host := []apikey.Role{apikey.RoleHost}
	a := "/v1/accounts/" + agentA
	w := "/v1/wallets/" + walletW
	return []route{
		{method: "GET", path: "/healthz", reader: public, ok: []int{200}},
		{method: "GET", path: "/readyz", reader: public, ok: []int{200}},
		{method: "GET", path: "/openapi.json", reader: public, ok: []int{200}},
		{method: "GET", path: "/.well-known/jwks.json", reader: public, ok: []int{200}},
		{method: "GET", path: "/metrics", reader: public, ok: []int{200}},
		{method: "POST", path: "/v1/consume", body: consumeBody(agentA, "matrix", 1), roles: host, ok: []int{200}},
		{method: "POST", path: "/v1/check", body: consumeBody(agentA, "matrix-check", 1), roles: host, ok: []int{200}},
		{method: "POST", path: "/v1/authorize", body: f.authorizeBody("matrix-hold"), roles: host, ok: []int{200}},
		{method: "GET", path: "/v1/holds/" + f.holdID, roles: []apikey.Role{apikey.RoleHost, apikey.RoleBilling}, ok: []int{200}},
		{method: "POST", path: "/v1/holds/" + f.captureHoldID + "/capture", body: map[string]any{"agentId": agentA, "cost": usd(1)},
			roles: host, ok: []int{200}},
		{method: "POST", path: "/v1/holds/" + f.releaseHoldID + "/release", body: map[string]any{"agentId": agentA}, roles: host, ok: []int{200}},
		{method: "PUT", path: a, body: map[string]any{"displayName": "A"}, roles: billing, ok: []int{200}},
		{method: "GET", path: a, roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "POST", path: a + "/entitlements", body: map[string]any{"type": "quota", "scope": map[string]any{"service": "search"},
			"limit": 10, "period": "day"}, ok: []int{201}},
		{method: "GET", path: a + "/entitlements?status=active&limit=2", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "GET", path: a + "/consumptions", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "POST", path: "/v1/consumptions/" + f.consumptionID + "/refund", roles: billing, ok: []int{200}},
		{method: "GET", path: a + "/receipts", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "GET", path: a + "/balance", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "GET", path: a + "/usage?groupBy=tool&tz=Europe/Berlin&limit=5", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "GET", path: a + "/wallets?limit=5", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "POST", path: w + "/members", body: map[string]any{"memberId": "member-new", "order": "wallet_first",
			"caps": map[string]any{"maxPerCall": usd(5), "spendLimit": map[string]any{"period": "week", "max": usd(100)}}}, ok: []int{201}},
		{method: "GET", path: w + "/members?limit=5", roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "GET", path: w + "/members/" + agentA, roles: billing, reader: readerByAgent, ok: []int{200}},
		{method: "PATCH", path: w + "/members/" + agentA, body: map[string]any{"order": "own_first", "caps": nil}, ok: []int{200}},
		{method: "DELETE", path: w + "/members/" + f.removableMember, ok: []int{200}},
		{method: "GET", path: "/v1/entitlements/" + f.entitlementID, roles: billing, reader: readerByOwner, ok: []int{200}},
		{method: "POST", path: "/v1/entitlements/" + f.revokableID + "/revoke", ok: []int{200}},
		{method: "PATCH", path: "/v1/entitlements/" + f.entitlementID, body: map[string]any{"metadata": map[string]string{"k": "v"}}, ok: []int{200}},
		{method: "PUT", path: a + "/limits", body: map[string]any{"maxUnitsPerCall": 1000000}, ok: []int{200}},
		{method: "POST", path: "/v1/payments", body: paymentBody(agentA, 100), header: map[string]string{"Idempotency-Key": "matrix"},
			roles: billing, ok: []int{200, 201}},
		{method: "GET", path: "/v1/payments/" + f.paymentID, roles: billing, ok: []int{200}},
		{method: "POST", path: "/v1/payments/" + f.paymentID + "/succeed", roles: billing, ok: []int{200}},
		{method: "POST", path: "/v1/payments/" + f.pendingID + "/fail", roles: billing, ok: []int{200}},
		{method: "POST", path: "/v1/payments/" + f.refundableID + "/refund", roles: billing, ok: []int{200}},
		{method: "GET", path: "/v1/receipts/" + f.receiptID, roles: billing, reader: readerByOwner, ok: []int{200}},
		{method: "POST", path: "/v1/webhook-endpoints", body: map[string]any{"url": "https://hooks.example/x"}, ok: []int{201}},
		{method: "GET", path: "/v1/webhook-endpoints?limit=5", ok: []int{200}},
		{method: "GET", path: "/v1/webhook-endpoints/" + f.endpointID, ok: []int{200}},
		{method: "POST", path: "/v1/webhook-endpoints/" + f.endpointID + "/disable", ok: []int{200}},
		{method: "PATCH", path: "/v1/webhook-endpoints/" + f.endpointID, ok: []int{200},
			body: map[string]any{"disabled": false, "eventTypes": []string{"payment.succeeded"}}},
		{method: "POST", path: "/v1/webhook-endpoints/" + f.endpointID + "/rotate-secret", body: map[string]any{"gracePeriodSeconds": 3600}, ok: []int{200}},
		{method: "DELETE", path: "/v1/webhook-endpoints/" + f.deletableID, ok: []int{204}},
		{method: "GET", path: "/v1/deliveries?status=dead", ok: []int{200}},
		{method: "GET", path: "/v1/deliveries/" + f.deliveryID, ok: []int{200}},
		{method: "POST", path: "/v1/deliveries/" + f.deliveryID + "/retry", ok: []int{200}},
		// Stripe events authenticate by signature, whatever the API key: a
		// bad signature is a 400 for everyone.
		{method: "POST", path: "/v1/webhooks/stripe", body: f.stripeEvent, header: map[string]string{"Stripe-Signature": "t=1,v1=00"},
			reader: public, ok: []int{400}},
	}
}

// fixtures are documents of agentA the route table refers to.
type fixtures struct {
	entitlementID, revokableID, paymentID, pendingID, refundableID, receiptID string
	endpointID, deletableID, deliveryID                                       string
	// holdID is an open hold, captureHoldID and releaseHoldID holds the
	// table captures and releases, consumptionID a consumption it refunds:
	// all on entitlementID.
	holdID, captureHoldID, releaseHoldID, consumptionID string
	// stripeEvent, signed by stripeSignature, succeeds a pending Stripe payment.
	stripeEvent, stripeSignature string
	// removableMember is a member of walletW, whose members agentA is too;
	// walletW has no entitlements, so agentA's calls charge as before.
	removableMember string
}

// authorizeBody is a hold of up to 2 USD on entitlementID under key.
func (f fixtures) authorizeBody(key string) map[string]any {
	b := authorizeBody(agentA, key, 2)
	b["entitlementId"] = f.entitlementID
	return b
}

func setupFixtures(e *env) fixtures {
	e.t.Helper()
	var f fixtures
	f.entitlementID = e.grantCredits(agentA, 1000)
	f.revokableID = e.grantCredits(agentA, 5)
	hold := func(key string) string {
		var out struct{ Hold struct{ ID string } }
		e.must(200, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: f.authorizeBody(key)}).decode(e.t, &out)
		return out.Hold.ID
	}
	f.holdID, f.captureHoldID, f.releaseHoldID = hold("fx-hold"), hold("fx-capture"), hold("fx-release")
	used := consumeBody(agentA, "fx-refund", 3)
	used["entitlementId"] = f.entitlementID
	var c struct{ Consumption struct{ ID string } }
	e.must(200, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: used}).decode(e.t, &c)
	f.consumptionID = c.Consumption.ID
	pay := func(key string) string {
		var p payment.Payment
		res := e.createPayment(key, paymentBody(agentA, 50))
		res.decode(e.t, &p)
		return p.ID
	}
	f.paymentID = pay("fx-1")
	var done completionBody
	e.must(200, req{Method: "POST", Path: "/v1/payments/" + f.paymentID + "/succeed", Key: e.keys.Billing}).decode(e.t, &done)
	f.receiptID = done.Receipt.ID
	f.pendingID = pay("fx-2")
	f.refundableID = pay("fx-3")
	e.must(200, req{Method: "POST", Path: "/v1/payments/" + f.refundableID + "/succeed", Key: e.keys.Billing})

	var ep struct{ ID string }
	e.must(201, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: e.keys.Admin,
		Body: map[string]any{"url": "https://hooks.example/fixture"}}).decode(e.t, &ep)
	f.endpointID = ep.ID
	e.must(201, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: e.keys.Admin,
		Body: map[string]any{"url": "https://hooks.example/deletable"}}).decode(e.t, &ep)
	f.deletableID = ep.ID
	f.deliveryID = deadDelivery(e, "d-fixture")

	b := paymentBody(agentA, 70)
	b["provider"], b["providerIntentId"] = "stripe", "pi_fixture"
	e.must(201, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: b, Header: map[string]string{"Idempotency-Key": "fx-stripe"}})
	f.stripeEvent = `{"id":"evt_fixture","object":"event","type":"payment_intent.succeeded","data":{"object":{"id":"pi_fixture","amount_received":70,"currency":"usd"}}}`
	f.stripeSignature = stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{
		Payload: []byte(f.stripeEvent), Secret: testStripeSecret}).Header
	e.makeWallet(walletW)
	e.addMember(walletW, agentA, dailyCap(500))
	f.removableMember = "member-removable"
	e.addMember(walletW, f.removableMember, nil)
	return f
}

// deadDelivery stores a delivery that failed for good, which may be retried.
func deadDelivery(e *env, id string) string {
	e.t.Helper()
	ds := e.store.(store.DeliveryStore)
	ctx := context.Background()
	if _, _, err := ds.EnqueueDelivery(ctx, store.Delivery{ID: id, Key: id, EndpointID: "ep", EventID: "ev-" + id,
		EventType: event.PaymentSucceeded, Payload: []byte(`{}`)}); err != nil {
		e.t.Fatalf("EnqueueDelivery: %v", err)
	}
	claimed, err := ds.ClaimDueDeliveries(ctx, e.clock.Now(), 10, time.Minute, "test")
	if err != nil {
		e.t.Fatalf("ClaimDueDeliveries: %v", err)
	}
	for _, d := range claimed {
		if _, err := ds.FinishDelivery(ctx, d.ID, d.ClaimToken, store.AttemptResult{Status: store.DeliveryDead}); err != nil {
			e.t.Fatalf("FinishDelivery: %v", err)
		}
	}
	return id
}

// TestAuthorizationMatrix: every route × {no key, bad key, each role, a
// reader of another agent} → the expected status.
func TestAuthorizationMatrix(t *testing.T) {
	e := newEnv(t)
	f := setupFixtures(e)
	principals := []struct {
		name string
		key  string
		role apikey.Role
	}{
		{"NoKey", "", ""},
		{"BadKey", "stp_admin_not-a-key", ""},
		{"Host", e.keys.Host, apikey.RoleHost},
		{"Billing", e.keys.Billing, apikey.RoleBilling},
		{"Admin", e.keys.Admin, apikey.RoleAdmin},
		{"Reader", e.keys.Reader, apikey.RoleReader},
		{"OtherReader", e.keys.OtherReader, apikey.RoleReader},
	}
	for _, r := range routeTable(f) {
		for _, p := range principals {
			want := expectedStatus(r, p.name, p.role)
			t.Run(fmt.Sprintf("%s_%s/%s", r.method, r.path, p.name), func(t *testing.T) {
				res := e.with(t).do(req{Method: r.method, Path: r.path, Key: p.key, Body: r.body, Header: r.header})
				if !slices.Contains(want, res.Status) {
					t.Errorf("%s %s as %s: status %d, want one of %v; body %s", r.method, r.path, p.name, res.Status, want, res.Body)
				}
				if res.Status >= 400 && res.Header.Get("Content-Type") != "application/problem+json" {
					t.Errorf("error answer Content-Type = %q, want application/problem+json", res.Header.Get("Content-Type"))
				}
			})
		}
	}
}

func expectedStatus(r route, principal string, role apikey.Role) []int {
	switch {
	case r.reader == public:
		return r.ok
	case principal == "NoKey" || principal == "BadKey":
		return []int{http.StatusUnauthorized}
	case role == apikey.RoleAdmin || slices.Contains(r.roles, role):
		return r.ok
	case role != apikey.RoleReader || r.reader == readerNever:
		return []int{http.StatusForbidden}
	case principal == "Reader":
		return r.ok
	case r.reader == readerByOwner:
		return []int{http.StatusNotFound}
	}
	return []int{http.StatusForbidden}
}
