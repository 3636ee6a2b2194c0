package conformance

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
)

// ledgerMiddlewareTests run idempotency.Middleware on the ledger, in
// production mode when the ledger is durable (development mode otherwise,
// which production refuses): a key held by a running request answers 409
// with the ledger's reference of its row, and a finished one replays
// without running the handler again.
var ledgerMiddlewareTests = []ledgerTest{
	{"Middleware/HeldThenReplayed", func(t *testing.T, l idempotency.Ledger, _ *Clock) {
		e := echo.New()
		entered, release := make(chan struct{}), make(chan struct{})
		calls := 0
		e.POST("/v1/payments/:id/refund", func(c echo.Context) error {
			calls++
			close(entered)
			<-release
			return c.JSON(http.StatusOK, map[string]string{"refunded": c.Param("id")})
		}, idempotency.Middleware(l, idempotency.Options{Namespace: "prod", Development: !l.Durable()}))
		do := func() *httptest.ResponseRecorder {
			req := httptest.NewRequest(http.MethodPost, "/v1/payments/p1/refund", strings.NewReader(`{}`))
			req.Header.Set(idempotency.HeaderKey, "refund-key-1")
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, req)
			return rec
		}
		first := make(chan *httptest.ResponseRecorder)
		go func() { first <- do() }()
		select {
		case <-entered:
		case rec := <-first:
			t.Fatalf("first POST answered %d without running the handler: %s", rec.Code, rec.Body)
		}
		held := do()
		if held.Code != http.StatusConflict {
			close(release)
			<-first
			t.Fatalf("POST while held: status %d, want 409; body %s", held.Code, held.Body)
		}
		var p problem.Problem
		if err := json.Unmarshal(held.Body.Bytes(), &p); err != nil {
			t.Errorf("409 body: %v", err)
		}
		id := idempotency.HashKey("prod", "POST /v1/payments/:id/refund", "refund-key-1")
		if want := l.Reference(id); p.Reference != want || want == "" {
			t.Errorf("409 reference = %q, want the ledger's reference %q", p.Reference, want)
		}
		close(release)
		if rec := <-first; rec.Code != http.StatusOK {
			t.Fatalf("first POST: status %d, want 200", rec.Code)
		}
		again := do()
		if again.Code != http.StatusOK || again.Header().Get(idempotency.HeaderReplayed) != "true" {
			t.Errorf("retry: status %d, %s %q; want 200 replayed", again.Code, idempotency.HeaderReplayed, again.Header().Get(idempotency.HeaderReplayed))
		}
		if calls != 1 {
			t.Errorf("handler ran %d times, want 1", calls)
		}
	}},
}
