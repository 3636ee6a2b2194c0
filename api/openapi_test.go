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

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/store"
)

func loadOpenAPI(tb testing.TB) (*openapi3.T, routers.Router) {
	tb.Helper()
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPI)
	if err != nil {
		tb.Fatalf("loading openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		tb.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		tb.Fatal(err)
	}
	return doc, router
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
	doc, router := loadOpenAPI(t)
	var mu sync.Mutex
	seen := map[string]bool{} // "operationId status"
	check := func(tb testing.TB) func(*http.Request, *http.Response, []byte) {
		return func(req *http.Request, res *http.Response, body []byte) {
			tb.Helper()
			route, params, err := router.FindRoute(req)
			if err != nil {
				if res.StatusCode == http.StatusNotFound || res.StatusCode == http.StatusMethodNotAllowed {
					return // not a route: nothing to check
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
				// A request the server accepted must be one the document allows.
				if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
					tb.Errorf("%s %s: accepted request does not match openapi.json: %v", req.Method, req.URL.Path, err)
				}
			}
			mu.Lock()
			seen[fmt.Sprintf("%s %d", route.Operation.OperationID, res.StatusCode)] = true
			mu.Unlock()
		}
	}

	e := newEnv(t)
	e.observe = check(t)
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
	e.must(400, req{Method: "POST", Path: "/v1/payments", Key: billing, Body: paymentBody(agentA, 1)})
	e.must(422, req{Method: "POST", Path: "/v1/payments", Key: billing, Body: paymentBody(agentA, 2), Header: map[string]string{"Idempotency-Key": "matrix"}})
	e.must(404, req{Method: "GET", Path: "/v1/payments/nope", Key: billing})
	e.must(404, req{Method: "POST", Path: "/v1/payments/nope/succeed", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/payments/" + f.pendingID + "/succeed", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/payments/" + f.pendingID + "/refund", Key: billing})
	e.must(409, req{Method: "POST", Path: "/v1/payments/" + f.paymentID + "/fail", Key: billing})
	e.must(404, req{Method: "GET", Path: "/v1/receipts/nope", Key: billing})

	down := newEnv(t, func(c *api.Config) { c.Store = downStore{c.Store} })
	down.observe = check(t)
	down.must(503, req{Method: "GET", Path: "/readyz"})

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
			for s := range seen {
				if strings.HasPrefix(s, op.OperationID+" 2") {
					okSeen = true
				}
			}
			if !okSeen {
				t.Errorf("%s %s (%s) was never answered with a 2xx in this test", method, path, op.OperationID)
			}
		}
	}
	var all []string
	for s := range seen {
		all = append(all, s)
	}
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
