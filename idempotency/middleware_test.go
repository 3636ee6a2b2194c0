package idempotency_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/internal/syncbuf"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// fixture is an echo server with one key-requiring route, POST /things/:id,
// whose handler's behaviour the test chooses.
type fixture struct {
	e       *echo.Echo
	ledger  idempotency.Ledger
	clock   *conformance.Clock
	calls   atomic.Int64
	logs    *syncbuf.Buffer
	handler func(c echo.Context, n int64) error
}

// created answers 201 with a body naming the call number.
func created(c echo.Context, n int64) error {
	c.Response().Header().Set(echo.HeaderLocation, fmt.Sprintf("/things/%d", n))
	return c.JSON(http.StatusCreated, map[string]any{"call": n, "id": c.Param("id")})
}

func newFixture(t *testing.T, ledger idempotency.Ledger, tweak func(*idempotency.Options)) *fixture {
	t.Helper()
	f := &fixture{e: echo.New(), clock: conformance.NewClock(), logs: &syncbuf.Buffer{}, handler: created}
	f.clock.Set(time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC))
	if ledger == nil {
		ledger = memledger.New(idempotency.CollectionName("test"), memledger.WithClock(f.clock.Now))
	}
	f.ledger = ledger
	opts := idempotency.Options{
		Namespace:   "test",
		Principal:   func(c echo.Context) string { return c.Request().Header.Get("X-Test-Principal") },
		Development: true,
		Now:         f.clock.Now,
		Logger:      slog.New(slog.NewTextHandler(f.logs, nil)),
	}
	if tweak != nil {
		tweak(&opts)
	}
	f.e.POST("/things/:id", func(c echo.Context) error {
		return f.handler(c, f.calls.Add(1))
	}, idempotency.Middleware(ledger, opts))
	return f
}

// do sends a request; key "" sends no Idempotency-Key.
func (f *fixture) do(t *testing.T, path, key, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	return f.doContext(t, context.Background(), path, key, body, hdr...)
}

// doContext is do with the request's context ctx.
func (f *fixture) doContext(t *testing.T, ctx context.Context, path, key, body string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)).WithContext(ctx)
	req.Header.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	if key != "" {
		req.Header.Set(idempotency.HeaderKey, key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	rec := httptest.NewRecorder()
	f.e.ServeHTTP(rec, req)
	return rec
}

func wantStatus(t *testing.T, call string, rec *httptest.ResponseRecorder, want int) {
	t.Helper()
	if rec.Code != want {
		t.Fatalf("%s: status %d, want %d; body %s", call, rec.Code, want, rec.Body)
	}
}

// wantProblem checks a problem+json answer and returns it.
func wantProblem(t *testing.T, call string, rec *httptest.ResponseRecorder, status int, kind problem.Kind) problem.Problem {
	t.Helper()
	wantStatus(t, call, rec, status)
	if got := rec.Header().Get(echo.HeaderContentType); got != "application/problem+json" {
		t.Errorf("%s: Content-Type %q, want application/problem+json", call, got)
	}
	var p problem.Problem
	if err := json.Unmarshal(rec.Body.Bytes(), &p); err != nil {
		t.Fatalf("%s: problem body %q: %v", call, rec.Body, err)
	}
	if got, want := p.Type, kind.URI(); got != want || p.Status != status || p.Title == "" || p.Detail == "" {
		t.Errorf("%s: problem %+v, want type %q, status %d, a title and a detail", call, p, want, status)
	}
	return p
}

// wantReplayed fails unless rec is marked as a replay exactly when want
// (the header "true", or absent).
func wantReplayed(t *testing.T, call string, rec *httptest.ResponseRecorder, want bool) {
	t.Helper()
	wantHeader := map[bool]string{true: "true", false: ""}[want]
	if got := rec.Header().Get(idempotency.HeaderReplayed); got != wantHeader {
		t.Errorf("%s: %s = %q, want %q", call, idempotency.HeaderReplayed, got, wantHeader)
	}
}

// failFirst is a handler that fails its first call with status and msg
// and creates the thing on every later one.
func failFirst(status int, msg string) func(echo.Context, int64) error {
	return func(c echo.Context, n int64) error {
		if n == 1 {
			return echo.NewHTTPError(status, msg)
		}
		return created(c, n)
	}
}

func (f *fixture) wantCalls(t *testing.T, want int64) {
	t.Helper()
	if got := f.calls.Load(); got != want {
		t.Errorf("handler ran %d times, want %d", got, want)
	}
}

// ledgerID is the hashed id the fixture's route gives key.
func ledgerID(key string) string { return idempotency.HashKey("test", "POST /things/:id", key) }

// durable makes a memory ledger claim durability, to test production mode
// without Firestore.
type durable struct{ *memledger.Ledger }

func (durable) Durable() bool { return true }

// unavailable is a ledger whose store cannot be reached.
type unavailable struct{ *memledger.Ledger }

func (unavailable) Durable() bool { return true }

func (unavailable) Reserve(context.Context, idempotency.Attempt) (idempotency.Result, error) {
	return idempotency.Result{}, store.Errorf(store.CodeUnavailable, "test: ledger down")
}
