package api_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/internal/syncbuf"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func TestHealthAndReadiness(t *testing.T) {
	e := newEnv(t)
	e.must(200, req{Method: "GET", Path: "/healthz"})
	e.must(200, req{Method: "GET", Path: "/readyz"})

	down := newEnv(t, func(c *api.Config) { c.Store = downStore{c.Store} })
	p := down.must(503, req{Method: "GET", Path: "/readyz"}).problem(t)
	if p.Type != problem.Unavailable.URI() {
		t.Errorf("readyz type = %q", p.Type)
	}

	slow := newEnv(t, func(c *api.Config) {
		c.Store = hangingStore{c.Store}
		c.ReadyTimeout = 20 * time.Millisecond
	})
	slow.must(503, req{Method: "GET", Path: "/readyz"})
}

// hangingStore's probe waits until its context ends.
type hangingStore struct{ store.EntitlementStore }

func (hangingStore) Ping(ctx context.Context) error {
	<-ctx.Done()
	return store.Wrap(store.CodeUnavailable, ctx.Err(), "probe")
}

func TestAccessLogsAndRequestIDs(t *testing.T) {
	var logs syncbuf.Buffer
	e := newEnv(t, func(c *api.Config) { c.Logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	e.grantCredits(agentA, 10)
	res := e.must(200, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "secret-idem-key", 1),
		Header: map[string]string{"X-Request-Id": "req-123"}})
	if got := res.Header.Get("X-Request-Id"); got != "req-123" {
		t.Errorf("X-Request-Id = %q, want the caller's req-123", got)
	}
	res = e.must(200, req{Method: "GET", Path: "/healthz"})
	if got := res.Header.Get("X-Request-Id"); got == "" {
		t.Errorf("no generated X-Request-Id")
	}
	e.must(400, req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: "{}",
		Header: map[string]string{"Idempotency-Key": "secret-pay-key"}})

	out := logs.String()
	for _, secret := range []string{e.keys.Host, e.keys.Admin, e.keys.Billing, "secret-idem-key", "secret-pay-key"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs contain a secret %q:\n%s", secret, out)
		}
	}
	var found bool
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line is not JSON: %s", line)
		}
		if rec["requestId"] == "req-123" {
			found = true
			if rec["route"] != "/v1/consume" || rec["status"] != float64(200) || rec["role"] != "host" || rec["keyId"] != "host" {
				t.Errorf("access log = %v, want route, status, role and key ID", rec)
			}
		}
	}
	if !found {
		t.Errorf("no access log line for req-123:\n%s", out)
	}
}

func TestInternalErrorsAreHidden(t *testing.T) {
	var logs syncbuf.Buffer
	e := newEnv(t, func(c *api.Config) {
		c.Store = brokenStore{c.Store}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	p := e.must(500, req{Method: "GET", Path: "/v1/accounts/" + agentA, Key: e.keys.Admin}).problem(t)
	if strings.Contains(p.Detail, "disk on fire") || !strings.Contains(p.Detail, p.RequestID) || p.RequestID == "" {
		t.Errorf("internal problem detail = %q (request %q), want it hidden and the request ID shown", p.Detail, p.RequestID)
	}
	if !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("the internal error was not logged:\n%s", logs.String())
	}
	e.must(503, req{Method: "GET", Path: "/v1/payments/x", Key: e.keys.Admin})
}

// brokenStore fails account reads internally and payment reads as unavailable.
type brokenStore struct{ store.EntitlementStore }

func (brokenStore) GetAccount(context.Context, string) (entitlement.Account, error) {
	return entitlement.Account{}, store.Errorf(store.CodeInternal, "disk on fire")
}

func (brokenStore) GetPayment(context.Context, string) (payment.Payment, error) {
	return payment.Payment{}, store.Errorf(store.CodeUnavailable, "try later")
}

func TestMetrics(t *testing.T) {
	e := newEnv(t)
	e.grantCredits(agentA, 10)
	e.must(200, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "m1", 5)})
	e.must(402, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "m2", 50)})
	e.must(404, req{Method: "GET", Path: "/v1/payments/none", Key: e.keys.Admin})

	body := string(e.must(200, req{Method: "GET", Path: "/metrics"}).Body)
	for _, want := range []string{
		`stipend_http_request_duration_seconds_count{method="POST",route="/v1/consume",status="200"} 1`,
		`stipend_http_request_duration_seconds_count{method="POST",route="/v1/consume",status="402"} 1`,
		`stipend_consume_results_total{reason="",result="consumed",route="consume"} 1`,
		`stipend_consume_results_total{reason="insufficient_balance",result="no_longer_valid",route="consume"} 1`,
		`stipend_store_errors_total{code="not_found"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestCORS(t *testing.T) {
	e := newEnv(t)
	res := e.do(req{Method: "OPTIONS", Path: "/v1/accounts/" + agentA, Header: map[string]string{
		"Origin": "https://ui.example", "Access-Control-Request-Method": "GET",
		"Access-Control-Request-Headers": "Authorization"}})
	if res.Status != http.StatusNoContent || res.Header.Get("Access-Control-Allow-Origin") != "https://ui.example" {
		t.Errorf("preflight: status %d headers %v, want 204 allowing the origin", res.Status, res.Header)
	}
	res = e.do(req{Method: "GET", Path: "/v1/accounts/" + agentA, Key: e.keys.Reader, Header: map[string]string{"Origin": "https://evil.example"}})
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("unknown origin allowed: %q", got)
	}
	res = e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "c", 1),
		Header: map[string]string{"Origin": "https://ui.example"}})
	if got := res.Header.Get("Access-Control-Allow-Origin"); got != "" {
		t.Errorf("CORS on a non-reader route: %q", got)
	}
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t)
	p := e.must(404, req{Method: "GET", Path: "/v1/nothing"}).problem(t)
	if p.Type != problem.NotFound.URI() {
		t.Errorf("type = %q", p.Type)
	}
	e.must(405, req{Method: "DELETE", Path: "/v1/consume"}).problem(t)
}

func TestRouteMiddleware(t *testing.T) {
	var mu sync.Mutex
	var asked []string
	var ran int
	e := newEnv(t, func(c *api.Config) {
		c.RouteMiddleware = func(method, path string) []echo.MiddlewareFunc {
			mu.Lock()
			asked = append(asked, method+" "+path)
			mu.Unlock()
			if method != http.MethodPost || path != "/v1/payments/:id/refund" {
				return nil
			}
			return []echo.MiddlewareFunc{func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c echo.Context) error {
					ran++
					return c.JSON(http.StatusTeapot, map[string]string{"principal": api.PrincipalOf(c)})
				}
			}}
		}
	})
	e.noSpec = true // the teapot is not in the document
	e.must(http.StatusUnauthorized, req{Method: "POST", Path: "/v1/payments/x/refund"})
	if ran != 0 || len(asked) != 0 {
		t.Errorf("route middleware ran (%d) or was asked (%v) before authentication", ran, asked)
	}
	var got struct{ Principal string }
	e.must(http.StatusTeapot, req{Method: "POST", Path: "/v1/payments/x/refund", Key: e.keys.Billing}).decode(t, &got)
	if got.Principal != "billing" {
		t.Errorf("PrincipalOf in route middleware = %q, want the key ID billing", got.Principal)
	}
	e.must(http.StatusTeapot, req{Method: "POST", Path: "/v1/payments/y/refund", Key: e.keys.Admin})
	e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/payments/x/succeed", Key: e.keys.Billing})
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/webhook-endpoints", Key: e.keys.Admin})
	want := []string{"POST /v1/payments/:id/refund", "POST /v1/payments/:id/succeed", "GET /v1/webhook-endpoints"}
	if !slices.Equal(asked, want) || ran != 2 {
		t.Errorf("asked %v and ran %d times, want %v once each and 2 runs", asked, ran, want)
	}
}

// unavailableStore cannot reach its backend for consumes.
type unavailableStore struct{ store.EntitlementStore }

func (unavailableStore) CheckAndConsume(context.Context, entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return store.ConsumeResult{}, store.Errorf(store.CodeUnavailable, "deadline exceeded")
}

func TestConsume_StoreUnavailableIs503(t *testing.T) {
	e := newEnv(t, func(c *api.Config) { c.Store = unavailableStore{c.Store} })
	res := e.must(http.StatusServiceUnavailable, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k", 1)})
	if p := res.problem(t); p.Type != problem.Unavailable.URI() || !strings.Contains(p.Detail, "same idempotency key") {
		t.Errorf("problem = %+v, want unavailable saying a retry with the same key is safe", p)
	}
	if got := res.Header.Get("Retry-After"); got != problem.RetryAfterSeconds {
		t.Errorf("Retry-After = %q, want %q: a retry can succeed", got, problem.RetryAfterSeconds)
	}
}

// panickyStore panics on account reads.
type panickyStore struct{ store.EntitlementStore }

func (panickyStore) GetAccount(context.Context, string) (entitlement.Account, error) {
	panic("bug in the store")
}

func TestPanicIs500(t *testing.T) {
	var logs syncbuf.Buffer
	e := newEnv(t, func(c *api.Config) {
		c.Store = panickyStore{c.Store}
		c.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	p := e.must(http.StatusInternalServerError, req{Method: "GET", Path: "/v1/accounts/" + agentA, Key: e.keys.Admin}).problem(t)
	if strings.Contains(p.Detail, "bug in the store") {
		t.Errorf("the panic shows in the answer: %q", p.Detail)
	}
	if !strings.Contains(logs.String(), "bug in the store") {
		t.Errorf("the panic was not logged:\n%s", logs.String())
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/healthz"})
}
