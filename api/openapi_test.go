package api_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/store"
)

var (
	specOnce   sync.Once
	specDoc    *openapi3.T
	specRouter routers.Router
	specErr    error
)

// loadOpenAPI loads and validates openapi.json once for the whole test binary.
func loadOpenAPI(tb testing.TB) (*openapi3.T, routers.Router) {
	tb.Helper()
	specOnce.Do(func() {
		specDoc, specErr = openapi3.NewLoader().LoadFromData(api.OpenAPI)
		if specErr == nil {
			specErr = specDoc.Validate(context.Background())
		}
		if specErr == nil {
			specRouter, specErr = legacy.NewRouter(specDoc)
		}
	})
	if specErr != nil {
		tb.Fatalf("openapi.json: %v", specErr)
	}
	return specDoc, specRouter
}

// checkSpec checks one real answer against openapi.json: its route must be
// documented, and its status, content type and body must match. A request
// the server accepted must also be one the document allows. seen, if not
// nil, records "operationId status".
func checkSpec(tb testing.TB, req *http.Request, res *http.Response, body []byte, seen *sync.Map) {
	tb.Helper()
	_, router := loadOpenAPI(tb)
	route, params, err := router.FindRoute(req)
	if err != nil {
		if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed ||
			req.Method == http.MethodOptions {
			return // not a route (or a CORS preflight): nothing to check
		}
		tb.Errorf("%s %s: route not in openapi.json: %v", req.Method, req.URL.Path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: res.StatusCode,
		Header: res.Header, Body: io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		tb.Errorf("%s %s: response %d does not match openapi.json: %v\nbody: %s", req.Method, req.URL.Path, res.StatusCode, err, body)
	}
	if res.StatusCode < 300 {
		if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
			tb.Errorf("%s %s: accepted request does not match openapi.json: %v", req.Method, req.URL.Path, err)
		}
	}
	if seen != nil {
		seen.Store(fmt.Sprintf("%s %d", route.Operation.OperationID, res.StatusCode), true)
	}
}

// downStore is a store whose probe fails, for /readyz.
type downStore struct{ store.EntitlementStore }

func (downStore) Ping(context.Context) error {
	return store.Errorf(store.CodeUnavailable, "probe refused")
}

// TestOpenAPI_Responses sends requests to every route, permitted and not,
// valid and not, and checks each real response (status, content type,
// body) against openapi.json. It also checks that every route is
// documented and every documented operation was exercised.
func TestOpenAPI_Responses(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	seen := &sync.Map{}
	e := newEnv(t)
	e.seen = seen
	f := setupFixtures(e)
	for _, k := range []string{"", "bad", e.keys.Host, e.keys.Billing, e.keys.Admin, e.keys.Reader, e.keys.OtherReader} {
		for _, r := range routeTable(f) {
			e.do(req{Method: r.method, Path: r.path, Key: k, Body: r.body, Header: r.header})
		}
	}
	// Error answers of every kind.
	admin, host, billing := e.keys.Admin, e.keys.Host, e.keys.Billing
	e.must(400, req{Method: "POST", Path: "/v1/consume", Key: host, Body: `{"agentId":1}`})
	e.must(402, req{Method: "POST", Path: "/v1/consume", Key: host, Body: consumeBody(agentB, "x", 1)})
	e.must(402, req{Method: "POST", Path: "/v1/check", Key: host, Body: consumeBody(agentB, "x", 1)})
	e.must(422, req{Method: "POST", Path: "/v1/consume", Key: host, Body: consumeBody(agentA, "matrix", 2)})
	e.must(422, req{Method: "POST", Path: "/v1/check", Key: host, Body: consumeBody(agentA, "matrix", 2)})
	e.must(200, req{Method: "POST", Path: "/v1/check", Key: host, Body: consumeBody(agentA, "matrix", 1)})
	e.must(400, req{Method: "POST", Path: "/v1/authorize", Key: host, Body: `{"agentId":1}`})
	e.must(402, req{Method: "POST", Path: "/v1/authorize", Key: host, Body: authorizeBody(agentB, "x", 1)})
	e.must(422, req{Method: "POST", Path: "/v1/authorize", Key: host, Body: authorizeBody(agentA, "matrix", 1)})
	e.must(400, req{Method: "POST", Path: "/v1/holds/" + f.holdID + "/capture", Key: host, Body: map[string]any{"agentId": agentA, "cost": usd(3)}})
	e.must(404, req{Method: "POST", Path: "/v1/holds/nope/capture", Key: host, Body: map[string]any{"agentId": agentA}})
	e.must(409, req{Method: "POST", Path: "/v1/holds/" + f.releaseHoldID + "/capture", Key: host, Body: map[string]any{"agentId": agentA}})
	e.must(404, req{Method: "POST", Path: "/v1/holds/nope/release", Key: host, Body: map[string]any{"agentId": agentA}})
	e.must(409, req{Method: "POST", Path: "/v1/holds/" + f.captureHoldID + "/release", Key: host, Body: map[string]any{"agentId": agentA}})
	e.must(404, req{Method: "GET", Path: "/v1/holds/nope", Key: billing})
	brief := f.authorizeBody("brief")
	brief["ttlSeconds"] = 1
	var held struct{ Hold struct{ ID string } }
	e.must(200, req{Method: "POST", Path: "/v1/authorize", Key: host, Body: brief}).decode(t, &held)
	e.clock.Advance(time.Second)
	e.must(409, req{Method: "POST", Path: "/v1/holds/" + held.Hold.ID + "/capture", Key: host, Body: map[string]any{"agentId": agentA}})
	e.must(400, req{Method: "POST", Path: "/v1/consumptions/" + f.consumptionID + "/refund", Key: billing, Body: `{"units":0}`})
	e.must(404, req{Method: "POST", Path: "/v1/consumptions/nope/refund", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/consumptions/" + f.consumptionID + "/refund", Key: billing, Body: map[string]any{"cost": usd(1)}})
	refundKey := map[string]string{"Idempotency-Key": "matrix-refund"}
	e.must(200, req{Method: "POST", Path: "/v1/consumptions/" + f.consumptionID + "/refund", Key: billing, Header: refundKey})
	e.must(422, req{Method: "POST", Path: "/v1/consumptions/" + f.consumptionID + "/refund", Key: billing, Body: map[string]any{"cost": usd(1)}, Header: refundKey})
	e.must(415, req{Method: "POST", Path: "/v1/consume", Key: host, Body: "{}", Header: map[string]string{"Content-Type": "text/plain"}})
	e.must(413, req{Method: "POST", Path: "/v1/consume", Key: host, Body: `{"agentId":"` + strings.Repeat("a", api.DefaultBodyLimit) + `"}`})
	e.must(400, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: billing, Body: `{"displayName":5}`})
	e.must(200, req{Method: "PUT", Path: "/v1/accounts/new-agent", Key: billing})
	e.must(404, req{Method: "GET", Path: "/v1/accounts/nobody", Key: billing})
	e.must(400, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: admin, Body: `{"type":"credits"}`})
	e.must(400, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/entitlements?limit=500", Key: billing})
	e.must(400, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/entitlements?cursor=garbage", Key: billing})
	e.must(400, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/consumptions?since=yesterday", Key: billing})
	e.must(200, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/consumptions?since=2026-01-01T00:00:00Z&limit=1", Key: billing})
	e.must(400, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/receipts?limit=0", Key: billing})
	e.must(404, req{Method: "GET", Path: "/v1/entitlements/nope", Key: billing})
	e.must(404, req{Method: "POST", Path: "/v1/entitlements/nope/revoke", Key: admin})
	e.must(400, req{Method: "PATCH", Path: "/v1/entitlements/nope", Key: admin, Body: `{"balance":{"cents":1,"currency":"USD"}}`})
	e.must(404, req{Method: "PATCH", Path: "/v1/entitlements/nope", Key: admin, Body: `{}`})
	e.must(400, req{Method: "PUT", Path: "/v1/accounts/" + agentA + "/limits", Key: admin, Body: `{"maxUnitsPerCall":0}`})
	e.must(400, req{Method: "POST", Path: "/v1/payments", Key: billing, Body: paymentBody(agentA, 1)})
	e.must(422, req{Method: "POST", Path: "/v1/payments", Key: billing, Body: paymentBody(agentA, 2), Header: map[string]string{"Idempotency-Key": "matrix"}})
	e.must(404, req{Method: "GET", Path: "/v1/payments/nope", Key: billing})
	e.must(404, req{Method: "POST", Path: "/v1/payments/nope/succeed", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/payments/" + f.pendingID + "/succeed", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/payments/" + f.pendingID + "/refund", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/payments/" + f.paymentID + "/fail", Key: billing})
	e.must(404, req{Method: "GET", Path: "/v1/receipts/nope", Key: billing})
	e.must(400, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: admin, Body: `{"url":"ftp://x"}`})
	e.must(404, req{Method: "GET", Path: "/v1/webhook-endpoints/nope", Key: admin})
	e.must(400, req{Method: "PATCH", Path: "/v1/webhook-endpoints/" + f.endpointID, Key: admin, Body: `{"url":"http://127.0.0.1/"}`})
	e.must(404, req{Method: "PATCH", Path: "/v1/webhook-endpoints/nope", Key: admin, Body: `{}`})
	e.must(404, req{Method: "DELETE", Path: "/v1/webhook-endpoints/nope", Key: admin})
	e.must(400, req{Method: "POST", Path: "/v1/webhook-endpoints/" + f.endpointID + "/rotate-secret", Key: admin, Body: `{"gracePeriodSeconds":-1}`})
	e.must(404, req{Method: "POST", Path: "/v1/webhook-endpoints/nope/rotate-secret", Key: admin})
	e.must(400, req{Method: "GET", Path: "/v1/deliveries?status=lost", Key: admin})
	e.must(404, req{Method: "GET", Path: "/v1/deliveries/nope", Key: admin})
	e.must(409, req{Method: "POST", Path: "/v1/deliveries/" + f.deliveryID + "/retry", Key: admin})
	e.must(200, req{Method: "POST", Path: "/v1/webhooks/stripe", Body: f.stripeEvent, Header: map[string]string{"Stripe-Signature": f.stripeSignature}})

	// CORS preflights and plain OPTIONS on the reader routes.
	for _, path := range []string{"/v1/accounts/" + agentA, "/v1/accounts/" + agentA + "/entitlements", "/v1/accounts/" + agentA + "/consumptions",
		"/v1/accounts/" + agentA + "/receipts", "/v1/entitlements/x", "/v1/receipts/x", "/.well-known/jwks.json",
		"/v1/accounts/" + agentA + "/balance", "/v1/accounts/" + agentA + "/usage", "/v1/accounts/" + agentA + "/wallets",
		"/v1/wallets/" + walletW + "/members", "/v1/wallets/" + walletW + "/members/" + agentA} {
		e.must(204, req{Method: "OPTIONS", Path: path})
		pre := e.must(204, req{Method: "OPTIONS", Path: path, Header: map[string]string{"Origin": "https://ui.example", "Access-Control-Request-Method": "GET"}})
		if got := pre.Header.Get("Access-Control-Allow-Origin"); got != "https://ui.example" {
			t.Errorf("preflight of %s: Access-Control-Allow-Origin %q, want the configured origin", path, got)
		}
	}

	down := newEnv(t, func(c *api.Config) { c.Store = downStore{c.Store} })
	down.seen = seen
	down.must(503, req{Method: "GET", Path: "/readyz"})

	e.must(200, req{Method: "GET", Path: "/v1/payments?providerIntentId=pi_none", Key: billing})
	stripeOK := exerciseStripeRoutes(t, seen) // stripe_test.go
	exerciseTopUpRoutes(t, seen)              // topup_test.go
	exerciseWalletRoutes(t, seen)             // wallets_test.go

	portalStripeOK := exercisePortalRoutes(t, seen) // portal_test.go

	// Every route the server has is documented.
	for _, r := range e.srv.Echo().Routes() {
		if r.Method == "echo_route_not_found" {
			continue
		}
		p := regexp.MustCompile(`:(\w+)`).ReplaceAllString(r.Path, "{$1}")
		item := doc.Paths.Find(p)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("route %s %s is not in openapi.json", r.Method, p)
		}
	}
	// Every documented operation was exercised with a success status.
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			okSeen := false
			seen.Range(func(k, _ any) bool {
				okSeen = okSeen || strings.HasPrefix(k.(string), op.OperationID+" 2")
				return !okSeen
			})
			if !okSeen && (!stripeOK && op.OperationID == "createCheckoutSession" || !portalStripeOK && op.OperationID == "createAccountCheckout") {
				t.Logf("%s %s (%s) not exercised: no stripe-mock", method, path, op.OperationID)
			} else if !okSeen {
				t.Errorf("%s %s (%s) was never answered with a 2xx in this test", method, path, op.OperationID)
			}
		}
	}
	var all []string
	seen.Range(func(k, _ any) bool {
		all = append(all, k.(string))
		return true
	})
	sort.Strings(all)
	t.Logf("checked %d operation/status pairs: %s", len(all), strings.Join(all, ", "))
}

func TestOpenAPI_Served(t *testing.T) {
	e := newEnv(t)
	res := e.must(200, req{Method: "GET", Path: "/openapi.json"})
	if !bytes.Equal(res.Body, api.OpenAPI) {
		t.Errorf("served document differs from the embedded one")
	}
	if _, err := openapi3.NewLoader().LoadFromData(res.Body); err != nil {
		t.Errorf("served document: %v", err)
	}
}

// TestOpenAPI_LedgerRoutesRequireKey keeps openapi.json and api.LedgerRoutes
// in step: exactly the ledger's routes, and POST /v1/payments (whose key is
// the payment's own), require an Idempotency-Key header, and each of them
// documents the 400 a request without one gets.
func TestOpenAPI_LedgerRoutesRequireKey(t *testing.T) {
	doc, _ := loadOpenAPI(t)
	want := map[string]bool{"POST /v1/payments": true, "POST /v1/checkout-sessions": true, "POST /v1/accounts/{agentId}/checkout": true}
	param := regexp.MustCompile(`:([A-Za-z]+)`)
	for _, r := range api.LedgerRoutes {
		want[param.ReplaceAllString(r, "{$1}")] = true
	}
	got := map[string]bool{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			for _, p := range op.Parameters {
				if p.Value.In == "header" && p.Value.Name == "Idempotency-Key" && p.Value.Required {
					got[method+" "+path] = true
					if op.Responses.Status(http.StatusBadRequest) == nil {
						t.Errorf("%s %s requires an Idempotency-Key but documents no 400", method, path)
					}
				}
			}
		}
	}
	for r := range want {
		if !got[r] {
			t.Errorf("%s: Idempotency-Key not documented as required", r)
		}
	}
	for r := range got {
		if !want[r] {
			t.Errorf("%s: Idempotency-Key documented as required, but the route is not in api.LedgerRoutes", r)
		}
	}
}
