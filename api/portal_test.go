package api_test

import (
	"bytes"
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3filter"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/internal/stripemock"
)

// The page and its assets are checked against openapi.json as the rest:
// their bodies are opaque strings.
func init() {
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, openapi3filter.FileBodyDecoder)
	}
}

// portalSession is the answer of POST /v1/portal-sessions.
type portalSession struct {
	ID        string     `json:"id"`
	AgentID   string     `json:"agentId"`
	Token     string     `json:"token"`
	URL       string     `json:"url"`
	ExpiresAt time.Time  `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt"`
}

// mintPortal mints a portal session of agent with the billing key.
func (e *env) mintPortal(agent string, body map[string]any) portalSession {
	e.t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	body["agentId"] = agent
	var ps portalSession
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/portal-sessions", Key: e.keys.Billing, Body: body}).decode(e.t, &ps)
	return ps
}

// portalAdmitted are the requests a portal session of agentA may make:
// its own agent's routes of api's portal allow-list.
func portalAdmitted() []req {
	a := "/v1/accounts/" + agentA
	return []req{
		{Method: "GET", Path: a + "/balance"},
		{Method: "GET", Path: a + "/usage"},
		{Method: "GET", Path: a + "/consumptions"},
		{Method: "GET", Path: a + "/receipts"},
		{Method: "GET", Path: a + "/topup"},
		{Method: "PUT", Path: a + "/topup", Body: topUpBody()},
		{Method: "DELETE", Path: a + "/topup"},
		{Method: "GET", Path: a + "/wallets"},
		{Method: "GET", Path: "/v1/portal/session"},
	}
}

// exercisePortalRoutes answers every portal route once with a success,
// for TestOpenAPI_Responses; it reports whether stripe-mock was there for
// the top-up Checkout.
func exercisePortalRoutes(t *testing.T, seen *sync.Map) bool {
	e := newEnv(t)
	e.seen = seen
	ps := e.mintPortal(agentA, map[string]any{"ttlSeconds": 600})
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/portal/session", Key: ps.Token})
	e.must(http.StatusNoContent, req{Method: "OPTIONS", Path: "/v1/portal/session", Header: map[string]string{"Origin": "null", "Access-Control-Request-Method": "GET"}})
	e.must(http.StatusNoContent, req{Method: "OPTIONS", Path: "/v1/accounts/" + agentA + "/checkout", Header: map[string]string{"Origin": "null", "Access-Control-Request-Method": "POST"}})
	e.must(http.StatusOK, req{Method: "GET", Path: "/portal"})
	e.must(http.StatusOK, req{Method: "GET", Path: "/portal/assets/portal.js"})
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/portal-sessions/" + ps.ID, Key: e.keys.Billing})
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/portal-sessions/" + ps.ID + "/revoke", Key: e.keys.Billing})
	e.must(http.StatusOK, req{Method: "DELETE", Path: "/v1/portal-sessions/" + ps.ID, Key: e.keys.Admin})
	ran := false
	t.Run("PortalCheckout", func(t *testing.T) {
		s := newEnv(t, withStripe(t, stripemock.URL(t)))
		s.seen = seen
		ps := s.mintPortal(agentA, nil)
		s.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/checkout", Key: ps.Token,
			Body: `{"amount":{"cents":1500,"currency":"USD"}}`, Header: map[string]string{"Idempotency-Key": "wallet-1"}})
		ran = true
	})
	return ran
}

// TestPortal_SessionReadsOnlyItsAgent: a portal session of agent A is
// admitted on its allow-list for A, and refused, exactly as an unknown
// API key is, on every other route and for agent B (reading B, paying
// for B).
func TestPortal_SessionReadsOnlyItsAgent(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing})
	e.saveMethod(agentA)
	ps := e.mintPortal(agentA, nil)
	unknown := e.must(http.StatusUnauthorized, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: "stp_billing_nonsense"}).problem(t)
	var me struct {
		ID, AgentID string
		Checkout    bool
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/portal/session", Key: ps.Token}).decode(t, &me)
	if me.ID != ps.ID || me.AgentID != agentA || me.Checkout {
		t.Errorf("GET /v1/portal/session = %+v, want session %s of %s, no Checkout (no Stripe)", me, ps.ID, agentA)
	}

	admitted := map[string]bool{}
	for _, r := range portalAdmitted() {
		r.Key = ps.Token
		if res := e.do(r); res.Status >= 300 {
			t.Errorf("%s %s with A's session: %d, want it admitted; body %s", r.Method, r.Path, res.Status, res.Body)
		}
		admitted[r.Method+" "+r.Path] = true
	}

	refused := func(r req) {
		t.Helper()
		r.Key = ps.Token
		res := e.do(r)
		if res.Status != http.StatusUnauthorized {
			t.Errorf("%s %s with A's session: %d, want 401; body %s", r.Method, r.Path, res.Status, res.Body)
			return
		}
		if p := res.problem(t); p.Type != unknown.Type || p.Detail != unknown.Detail {
			t.Errorf("%s %s with A's session: problem %s %q, want an unknown key's %s %q", r.Method, r.Path, p.Type, p.Detail, unknown.Type, unknown.Detail)
		}
	}
	// Agent B: reading, paying, changing its top-up.
	for _, r := range portalAdmitted() {
		r.Path = strings.Replace(r.Path, agentA, agentB, 1)
		if r.Path != "/v1/portal/session" {
			refused(r)
		}
	}
	refused(req{Method: "POST", Path: "/v1/accounts/" + agentB + "/checkout", Body: `{"amount":{"cents":100,"currency":"USD"}}`, Header: map[string]string{"Idempotency-Key": "k"}})
	refused(req{Method: "POST", Path: "/v1/checkout-sessions", Body: checkoutBody(agentB, 100), Header: map[string]string{"Idempotency-Key": "k"}})
	refused(req{Method: "POST", Path: "/v1/payments", Body: paymentBody(agentA, 100), Header: map[string]string{"Idempotency-Key": "k"}})

	// Every other route the server has, with A as the agent.
	public := regexp.MustCompile(`^(/healthz|/readyz|/openapi\.json|/metrics|/\.well-known/jwks\.json|/portal|/portal/assets/:name|/v1/webhooks/stripe)$`)
	param := regexp.MustCompile(`:[A-Za-z]+`)
	checked := 0
	for _, r := range e.srv.Echo().Routes() {
		if r.Method == "echo_route_not_found" || r.Method == http.MethodOptions || public.MatchString(r.Path) {
			continue
		}
		path := strings.ReplaceAll(r.Path, ":agentId", agentA)
		path = param.ReplaceAllString(path, "x")
		if admitted[r.Method+" "+path] || (r.Method == "POST" && path == "/v1/accounts/"+agentA+"/checkout") {
			continue
		}
		refused(req{Method: r.Method, Path: path, Body: "{}", Header: map[string]string{"Idempotency-Key": "k-" + r.Path}})
		checked++
	}
	if checked < 30 {
		t.Errorf("checked %d other routes, want every route of the server (30 or more)", checked)
	}
}

// TestPortal_RevokedOrExpiredRefused: after its revocation, or past its
// expiry, a session is refused everywhere, as an unknown key.
func TestPortal_RevokedOrExpiredRefused(t *testing.T) {
	e := newEnv(t)
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing})
	revoked := e.mintPortal(agentA, nil)
	expiring := e.mintPortal(agentA, map[string]any{"ttlSeconds": 60})
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/portal/session", Key: expiring.Token})

	var got portalSession
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/portal-sessions/" + revoked.ID + "/revoke", Key: e.keys.Billing}).decode(t, &got)
	if got.RevokedAt == nil || got.Token != "" {
		t.Errorf("revoke answered %+v, want revokedAt set and no token", got)
	}
	e.clock.Advance(61 * time.Second)
	for _, ps := range []portalSession{revoked, expiring} {
		for _, r := range portalAdmitted() {
			r.Key = ps.Token
			if res := e.do(r); res.Status != http.StatusUnauthorized {
				t.Errorf("%s %s with a revoked or expired session: %d, want 401", r.Method, r.Path, res.Status)
			}
		}
	}
	// A token of the right shape whose secret is wrong is no session.
	forged := revoked.Token[:len(revoked.Token)-4] + "0000"
	e.must(http.StatusUnauthorized, req{Method: "GET", Path: "/v1/portal/session", Key: forged})
	// The session route takes only a session's token.
	e.must(http.StatusUnauthorized, req{Method: "GET", Path: "/v1/portal/session", Key: e.keys.Admin})
}

// TestPortal_Mint: who may mint, the bounds of ttlSeconds, the URL, and a
// retry with the same Idempotency-Key answering the same session.
func TestPortal_Mint(t *testing.T) {
	e := newEnv(t)
	e.autoKey = false
	post := func(key string, body string, idem string) response {
		h := map[string]string{}
		if idem != "" {
			h["Idempotency-Key"] = idem
		}
		return e.do(req{Method: "POST", Path: "/v1/portal-sessions", Key: key, Body: body, Header: h})
	}
	for _, tt := range []struct {
		name, key, body, idem string
		want                  int
	}{
		{"Reader", e.keys.Reader, `{"agentId":"agent-a"}`, "r1", http.StatusForbidden},
		{"Host", e.keys.Host, `{"agentId":"agent-a"}`, "h1", http.StatusForbidden},
		{"NoKey", "", `{"agentId":"agent-a"}`, "n1", http.StatusUnauthorized},
		{"NoIdempotencyKey", e.keys.Billing, `{"agentId":"agent-a"}`, "", http.StatusBadRequest},
		{"NoAgent", e.keys.Billing, `{}`, "a1", http.StatusBadRequest},
		{"TTLTooShort", e.keys.Billing, `{"agentId":"agent-a","ttlSeconds":59}`, "t1", http.StatusBadRequest},
		{"TTLTooLong", e.keys.Billing, `{"agentId":"agent-a","ttlSeconds":86401}`, "t2", http.StatusBadRequest},
		{"Unknown field", e.keys.Billing, `{"agentId":"agent-a","scope":"all"}`, "u1", http.StatusBadRequest},
	} {
		if res := post(tt.key, tt.body, tt.idem); res.Status != tt.want {
			t.Errorf("%s: status %d, want %d; body %s", tt.name, res.Status, tt.want, res.Body)
		}
	}
	var first, again portalSession
	res := post(e.keys.Admin, `{"agentId":"agent-a","ttlSeconds":86400}`, "mint-1")
	if res.Status != http.StatusCreated {
		t.Fatalf("mint: %d %s", res.Status, res.Body)
	}
	res.decode(t, &first)
	if want := e.clock.Now().Add(24 * time.Hour); !first.ExpiresAt.Equal(want) {
		t.Errorf("expiresAt %v, want %v", first.ExpiresAt, want)
	}
	if !strings.HasPrefix(first.Token, "stp_portal_") || first.URL != "http://example.com/portal?session="+first.Token {
		t.Errorf("token %q, url %q: want stp_portal_… and the page's URL with it", first.Token, first.URL)
	}
	post(e.keys.Admin, `{"agentId":"agent-a","ttlSeconds":86400}`, "mint-1").decode(t, &again)
	if again.ID != first.ID || again.Token != first.Token {
		t.Errorf("a retry with the same key answered session %s, want the first %s", again.ID, first.ID)
	}
	if res := post(e.keys.Admin, `{"agentId":"agent-b"}`, "mint-1"); res.Status != http.StatusUnprocessableEntity {
		t.Errorf("the same key for another agent: %d, want 422", res.Status)
	}
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/portal-sessions/00000000-0000-0000-0000-000000000000", Key: e.keys.Billing})
	e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/portal-sessions/nope/revoke", Key: e.keys.Billing})
	pub := newEnv(t, func(c *api.Config) { c.PublicURL = "https://billing.example.com/" })
	if ps := pub.mintPortal(agentA, nil); ps.URL != "https://billing.example.com/portal?session="+ps.Token {
		t.Errorf("with a PublicURL: url %q", ps.URL)
	}
}

// TestPortal_TokenNeverLogged: neither minting nor using a session writes
// its token to the log.
func TestPortal_TokenNeverLogged(t *testing.T) {
	var logs bytes.Buffer
	e := newEnv(t, func(c *api.Config) {
		c.Logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	})
	ps := e.mintPortal(agentA, nil)
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: ps.Token})
	e.must(http.StatusUnauthorized, req{Method: "GET", Path: "/v1/accounts/" + agentB + "/balance", Key: ps.Token})
	e.must(http.StatusOK, req{Method: "GET", Path: "/portal?session=" + ps.Token})
	secret := ps.Token[strings.LastIndexByte(ps.Token, '_')+1:]
	if strings.Contains(logs.String(), secret) {
		t.Errorf("the log holds a session token:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"keyId":"portal-`+ps.ID+`"`) {
		t.Errorf("the access log does not name the session (keyId portal-%s):\n%s", ps.ID, logs.String())
	}
}

// TestPortal_PageHeaders: the page is framed by no one unless configured,
// sends no Referer, and loads nothing from another origin.
func TestPortal_PageHeaders(t *testing.T) {
	e := newEnv(t)
	res := e.must(http.StatusOK, req{Method: "GET", Path: "/portal"})
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "connect-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("CSP %q lacks %q", csp, want)
		}
	}
	if res.Header.Get("Referrer-Policy") != "no-referrer" || res.Header.Get("X-Frame-Options") != "DENY" || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v: want Referrer-Policy no-referrer, X-Frame-Options DENY, Cache-Control no-store", res.Header)
	}
	if !bytes.Contains(res.Body, []byte(`src="/portal/assets/portal.js"`)) {
		t.Errorf("the page does not load its script from /portal/assets")
	}
	framed := newEnv(t, func(c *api.Config) { c.PortalFrameAncestors = []string{"https://app.example.com", "'self'"} })
	res = framed.must(http.StatusOK, req{Method: "GET", Path: "/portal"})
	if csp := res.Header.Get("Content-Security-Policy"); !strings.HasSuffix(csp, "frame-ancestors https://app.example.com 'self'") || res.Header.Get("X-Frame-Options") != "" {
		t.Errorf("with frame ancestors: CSP %q, X-Frame-Options %q", csp, res.Header.Get("X-Frame-Options"))
	}
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/portal/assets/portal.html"})
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/portal/assets/nothing.js"})
	for _, bad := range [][]string{{"https://a.example; script-src *"}, {""}, {"https://a.example b"}} {
		if _, err := api.New(api.Config{Store: e.store, Keys: keySet, Development: true, PortalFrameAncestors: bad}); err == nil {
			t.Errorf("New with frame ancestors %q: no error", bad)
		}
	}
	if _, err := api.New(api.Config{Store: e.store, Keys: keySet, Development: true, PublicURL: "https://x.example/path"}); err == nil {
		t.Errorf("New with a PublicURL that has a path: no error")
	}
}

// TestPortal_CORS: a page of any origin (a sandboxed MCP App) may call a
// session's routes with its token; other keys keep the configured origins.
func TestPortal_CORS(t *testing.T) {
	e := newEnv(t)
	ps := e.mintPortal(agentA, nil)
	pre := e.must(http.StatusNoContent, req{Method: "OPTIONS", Path: "/v1/accounts/" + agentA + "/topup",
		Header: map[string]string{"Origin": "null", "Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "authorization,content-type"}})
	if pre.Header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(pre.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Errorf("preflight from a sandboxed frame: headers %v", pre.Header)
	}
	got := e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: ps.Token, Header: map[string]string{"Origin": "null"}})
	if got.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("a session's GET from a sandboxed frame: Access-Control-Allow-Origin %q, want *", got.Header.Get("Access-Control-Allow-Origin"))
	}
	other := e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: e.keys.Reader, Header: map[string]string{"Origin": "https://evil.example"}})
	if v := other.Header.Get("Access-Control-Allow-Origin"); v != "" {
		t.Errorf("a reader key's GET from an unlisted origin: Access-Control-Allow-Origin %q, want none", v)
	}
}
