package pgledger_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
)

// TestMiddleware_OnPostgres runs the middleware on the durable ledger in
// production mode: a held key answers 409 with a postgres/… reference, a
// finished one replays.
func TestMiddleware_OnPostgres(t *testing.T) {
	l := newLedger(t, time.Now)
	e := echo.New()
	entered, release := make(chan struct{}), make(chan struct{})
	calls := 0
	e.POST("/v1/payments/:id/refund", func(c echo.Context) error {
		calls++
		close(entered)
		<-release
		return c.JSON(http.StatusOK, map[string]string{"refunded": c.Param("id")})
	}, idempotency.Middleware(l, idempotency.Options{Namespace: "prod"}))
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/payments/p1/refund", strings.NewReader(`{}`))
		req.Header.Set(idempotency.HeaderKey, "refund-key-1")
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		return rec
	}
	first := make(chan *httptest.ResponseRecorder)
	go func() { first <- do() }()
	<-entered
	held := do()
	if held.Code != http.StatusConflict {
		t.Fatalf("POST while held: status %d, want 409; body %s", held.Code, held.Body)
	}
	var p problem.Problem
	if err := json.Unmarshal(held.Body.Bytes(), &p); err != nil {
		t.Fatalf("409 body: %v", err)
	}
	id := idempotency.HashKey("prod", "POST /v1/payments/:id/refund", "refund-key-1")
	if want := "postgres/" + idempotency.CollectionName("test") + "/" + id; p.Reference != want {
		t.Errorf("409 reference = %q, want %q", p.Reference, want)
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
}
