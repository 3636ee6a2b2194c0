package idempotency_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func TestMiddleware_MissingKey(t *testing.T) {
	f := newFixture(t, nil, nil)
	wantProblem(t, "POST without key", f.do(t, "/things/a", "", `{}`), http.StatusBadRequest, problem.IdempotencyKeyMissing)
	f.wantCalls(t, 0)
}

func TestMiddleware_InvalidKey(t *testing.T) {
	f := newFixture(t, nil, nil)
	for name, key := range map[string]string{
		"empty quoted": `""`,
		"too long":     strings.Repeat("k", idempotency.MaxKeyLen+1),
		"control char": "k\x01",
		"non-ASCII":    "clé",
		"quote":        `k"1`,
		"backslash":    `k\1`,
	} {
		p := wantProblem(t, "POST with key "+name, f.do(t, "/things/a", key, `{}`), http.StatusBadRequest, problem.IdempotencyKeyInvalid)
		if len(p.Errors) != 1 || p.Errors[0].Field != idempotency.HeaderKey {
			t.Errorf("POST with key %s: errors %+v, want one naming %s", name, p.Errors, idempotency.HeaderKey)
		}
	}
	rec := f.do(t, "/things/a", "k1", `{}`, idempotency.HeaderKey, "k2")
	wantProblem(t, "POST with two keys", rec, http.StatusBadRequest, problem.IdempotencyKeyInvalid)
	f.wantCalls(t, 0)
}

// TestMiddleware_ProblemsCarryRequestID: behind echo's request-ID
// middleware, every problem the middleware answers names the request's
// X-Request-Id, as the API's own problems do.
func TestMiddleware_ProblemsCarryRequestID(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.e.Pre(middleware.RequestID())
	wantStatus(t, "first POST", f.do(t, "/things/a", "k1", `{"x":1}`), http.StatusCreated)
	tests := []struct {
		name      string
		key, body string
		status    int
		kind      problem.Kind
	}{
		{"MissingKey", "", `{}`, http.StatusBadRequest, problem.IdempotencyKeyMissing},
		{"InvalidKey", "k\x01", `{}`, http.StatusBadRequest, problem.IdempotencyKeyInvalid},
		{"ReusedKey", "k1", `{"x":2}`, http.StatusUnprocessableEntity, problem.IdempotencyKeyReused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.do(t, "/things/a", tt.key, tt.body, echo.HeaderXRequestID, "req-"+tt.name)
			p := wantProblem(t, "POST", rec, tt.status, tt.kind)
			if got, want := p.RequestID, "req-"+tt.name; got != want || rec.Header().Get(echo.HeaderXRequestID) != want {
				t.Errorf("problem requestId %q, X-Request-Id %q; want both %q", got, rec.Header().Get(echo.HeaderXRequestID), want)
			}
		})
	}
}

func TestMiddleware_FirstRequestRunsThenReplays(t *testing.T) {
	f := newFixture(t, nil, nil)
	first := f.do(t, "/things/a", "k1", `{"x":1,"y":2}`)
	wantStatus(t, "first POST", first, http.StatusCreated)
	wantReplayed(t, "first POST", first, false)
	// Same request, JSON with other key order and spacing, quoted key form.
	second := f.do(t, "/things/a", `"k1"`, `{ "y": 2, "x": 1 }`)
	wantStatus(t, "retry", second, http.StatusCreated)
	wantReplayed(t, "retry", second, true)
	if got, want := second.Body.String(), first.Body.String(); got != want {
		t.Errorf("retry body = %s, want the first answer %s", got, want)
	}
	for _, h := range []string{echo.HeaderLocation, echo.HeaderContentType} {
		if got, want := second.Header().Get(h), first.Header().Get(h); got != want {
			t.Errorf("retry %s = %q, want %q", h, got, want)
		}
	}
	f.wantCalls(t, 1)
}

func TestMiddleware_DifferentRequestSameKeyIs422(t *testing.T) {
	tests := []struct{ name, path, body, principal string }{
		{"body", "/things/a", `{"x":2}`, "alice"},
		{"path", "/things/b", `{"x":1}`, "alice"},
		{"caller", "/things/a", `{"x":1}`, "mallory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, nil, nil)
			wantStatus(t, "first POST", f.do(t, "/things/a", "k1", `{"x":1}`, "X-Test-Principal", "alice"), http.StatusCreated)
			rec := f.do(t, tc.path, "k1", tc.body, "X-Test-Principal", tc.principal)
			wantProblem(t, "POST with a different "+tc.name, rec, http.StatusUnprocessableEntity, problem.IdempotencyKeyReused)
			f.wantCalls(t, 1)
		})
	}
}

func TestMiddleware_ConcurrentRequestIs409WithSanitizedReference(t *testing.T) {
	f := newFixture(t, nil, func(o *idempotency.Options) {
		o.OperationID = func(echo.Context) string { return "op-first" }
	})
	entered, release := make(chan struct{}), make(chan struct{})
	f.handler = func(c echo.Context, n int64) error {
		close(entered)
		<-release
		return created(c, n)
	}
	done := make(chan int)
	go func() { done <- f.do(t, "/things/a", "secret-key-1", `{}`).Code }()
	<-entered
	rec := f.do(t, "/things/a", "secret-key-1", `{}`)
	p := wantProblem(t, "POST while the first is in progress", rec, http.StatusConflict, problem.IdempotencyKeyInProgress)
	if want := "memory/" + idempotency.CollectionName("test") + "/" + ledgerID("secret-key-1"); p.Reference != want {
		t.Errorf("409 reference = %q, want %q", p.Reference, want)
	}
	if p.OperationID != "op-first" {
		t.Errorf("409 operationId = %q, want the holder's op-first", p.OperationID)
	}
	if got := rec.Header().Get("Retry-After"); got != problem.RetryAfterSeconds {
		t.Errorf("409 Retry-After = %q, want %q", got, problem.RetryAfterSeconds)
	}
	if strings.Contains(rec.Body.String(), "secret-key-1") {
		t.Errorf("409 body %s contains the raw key", rec.Body)
	}
	close(release)
	if got := <-done; got != http.StatusCreated {
		t.Fatalf("first POST: status %d, want 201", got)
	}
	wantStatus(t, "POST after the first completed", f.do(t, "/things/a", "secret-key-1", `{}`), http.StatusCreated)
	f.wantCalls(t, 1)
	if strings.Contains(f.logs.String(), "secret-key-1") {
		t.Errorf("logs contain the raw key:\n%s", f.logs)
	}
}

func TestMiddleware_ClientErrorReleasesKey(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.handler = failFirst(http.StatusBadRequest, "amount.cents: required")
	wantStatus(t, "invalid POST", f.do(t, "/things/a", "k1", `{}`), http.StatusBadRequest)
	if _, err := f.ledger.Get(context.Background(), ledgerID("k1")); err == nil {
		t.Errorf("ledger row still present after a 4xx; want it released")
	}
	wantStatus(t, "corrected POST with the same key", f.do(t, "/things/a", "k1", `{"amount":1}`), http.StatusCreated)
	f.wantCalls(t, 2)
}

func TestMiddleware_ServerErrorStaysInProgressUntilResolved(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.handler = failFirst(http.StatusInternalServerError, "upstream timed out")
	wantStatus(t, "failing POST", f.do(t, "/things/a", "k1", `{}`), http.StatusInternalServerError)
	p := wantProblem(t, "retry after a 5xx", f.do(t, "/things/a", "k1", `{}`), http.StatusConflict, problem.IdempotencyKeyInProgress)
	// The operator proves the write never happened and deletes the row.
	ctx := context.Background()
	rec, err := f.ledger.Inspect(ctx, p.Reference)
	if err != nil {
		t.Fatalf("Inspect(%q): %v", p.Reference, err)
	}
	if err := f.ledger.ResolveDelete(ctx, p.Reference, rec.UpdateTime); err != nil {
		t.Fatalf("ResolveDelete: %v", err)
	}
	wantStatus(t, "retry after reconciliation", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
	f.wantCalls(t, 2)
}

// TestMiddleware_UnchangedServerErrorReleasesKey: a 5xx the handler marks
// as having changed nothing (its store call failed with a definite answer)
// releases the key, so the client's retry runs the request again.
func TestMiddleware_UnchangedServerErrorReleasesKey(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.handler = func(c echo.Context, n int64) error {
		if n == 1 {
			idempotency.MarkUnchanged(c)
			return echo.NewHTTPError(http.StatusServiceUnavailable, "store unavailable before any write")
		}
		return created(c, n)
	}
	wantStatus(t, "failing POST", f.do(t, "/things/a", "k1", `{}`), http.StatusServiceUnavailable)
	if _, err := f.ledger.Get(context.Background(), ledgerID("k1")); err == nil {
		t.Errorf("ledger row still present after a 5xx that changed nothing; want it released")
	}
	wantStatus(t, "retry with the same key", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
	f.wantCalls(t, 2)
}

// TestMiddleware_ClientHangUpDoesNotCancelHandler: the client goes away
// while the handler holds the key; the handler's context is not cancelled,
// the change finishes and is recorded, and the client's retry replays it.
func TestMiddleware_ClientHangUpDoesNotCancelHandler(t *testing.T) {
	f := newFixture(t, nil, nil)
	ctx, hangUp := context.WithCancel(context.Background())
	f.handler = func(c echo.Context, n int64) error {
		hangUp() // the client disconnects mid-request
		if err := c.Request().Context().Err(); err != nil {
			return echo.NewHTTPError(http.StatusServiceUnavailable, "the change was cut short: "+err.Error())
		}
		return created(c, n)
	}
	wantStatus(t, "POST whose client hung up", f.doContext(t, ctx, "/things/a", "k1", `{}`), http.StatusCreated)
	again := f.do(t, "/things/a", "k1", `{}`)
	wantStatus(t, "the client's retry", again, http.StatusCreated)
	wantReplayed(t, "the client's retry", again, true)
	f.wantCalls(t, 1)
}

// TestMiddleware_HandlerKeepsRequestDeadline: the handler's context drops
// the client's hang-up but keeps the request's deadline (the server's bound
// on store calls), so a stalled store fails the handler in time.
func TestMiddleware_HandlerKeepsRequestDeadline(t *testing.T) {
	f := newFixture(t, nil, nil)
	deadline := time.Now().Add(time.Hour)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	var got time.Time
	var had bool
	f.handler = func(c echo.Context, n int64) error {
		got, had = c.Request().Context().Deadline()
		return created(c, n)
	}
	wantStatus(t, "POST with a deadline", f.doContext(t, ctx, "/things/a", "k1", `{}`), http.StatusCreated)
	if !had || !got.Equal(deadline) {
		t.Errorf("handler's context: deadline %v (set %v), want the request's %v", got, had, deadline)
	}
}

func TestMiddleware_OperatorCompletionIsReplayed(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.handler = func(c echo.Context, n int64) error { return c.String(http.StatusBadGateway, "upstream lost") }
	wantStatus(t, "failing POST", f.do(t, "/things/a", "k1", `{}`), http.StatusBadGateway)
	ref := f.ledger.Reference(ledgerID("k1"))
	rec, err := f.ledger.Inspect(context.Background(), ref)
	if err != nil {
		t.Fatalf("Inspect: %v", err)
	}
	proved := idempotency.Response{Status: 201, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(`{"proved":true}`)}
	if err := f.ledger.ResolveComplete(context.Background(), ref, rec.UpdateTime, proved, f.clock.Now().Add(time.Hour)); err != nil {
		t.Fatalf("ResolveComplete: %v", err)
	}
	got := f.do(t, "/things/a", "k1", `{}`)
	wantStatus(t, "retry after ResolveComplete", got, http.StatusCreated)
	if got.Body.String() != `{"proved":true}` || got.Header().Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("retry: body %s, replayed %q; want the operator's response, replayed", got.Body, got.Header().Get(idempotency.HeaderReplayed))
	}
	f.wantCalls(t, 1)
}

func TestMiddleware_OversizeResponseStaysInProgress(t *testing.T) {
	f := newFixture(t, nil, nil)
	big := strings.Repeat("x", idempotency.MaxResponseBytes+1)
	f.handler = func(c echo.Context, n int64) error { return c.String(http.StatusOK, big) }
	rec := f.do(t, "/things/a", "k1", `{}`)
	wantStatus(t, "POST with a huge answer", rec, http.StatusOK)
	if rec.Body.Len() != len(big) {
		t.Errorf("client got %d bytes, want the whole %d", rec.Body.Len(), len(big))
	}
	wantProblem(t, "retry", f.do(t, "/things/a", "k1", `{}`), http.StatusConflict, problem.IdempotencyKeyInProgress)
	f.wantCalls(t, 1)
}

func TestMiddleware_ExpiredResultRunsAgain(t *testing.T) {
	f := newFixture(t, nil, func(o *idempotency.Options) { o.Retention = time.Hour })
	wantStatus(t, "first POST", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
	f.clock.Advance(time.Hour)
	rec := f.do(t, "/things/a", "k1", `{}`)
	wantStatus(t, "POST after the retention", rec, http.StatusCreated)
	wantReplayed(t, "POST after the retention (an expired result)", rec, false)
	f.wantCalls(t, 2)
}

func TestMiddleware_ProductionRefusesNonDurableLedger(t *testing.T) {
	f := newFixture(t, nil, func(o *idempotency.Options) { o.Development = false })
	wantProblem(t, "POST on the memory ledger in production", f.do(t, "/things/a", "k1", `{}`), http.StatusServiceUnavailable, problem.IdempotencyLedgerNotDurable)
	f.wantCalls(t, 0)

	d := newFixture(t, durable{memledger.New("c")}, func(o *idempotency.Options) { o.Development = false })
	wantStatus(t, "POST on a durable ledger in production", d.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
}

func TestMiddleware_LedgerUnavailableIs503(t *testing.T) {
	f := newFixture(t, unavailable{memledger.New("c")}, func(o *idempotency.Options) { o.Development = false })
	wantProblem(t, "POST with the ledger down", f.do(t, "/things/a", "k1", `{}`), http.StatusServiceUnavailable, problem.Unavailable)
	f.wantCalls(t, 0)
}

// hanging is a ledger whose store never answers: a reservation waits
// until its context ends, as the Firestore client's retries do.
type hanging struct{ *memledger.Ledger }

func (hanging) Durable() bool { return true }

func (hanging) Reserve(ctx context.Context, _ idempotency.Attempt) (idempotency.Result, error) {
	<-ctx.Done()
	return idempotency.Result{}, store.Wrap(store.CodeUnavailable, ctx.Err(), "test: no answer")
}

// TestMiddleware_UnreachableLedgerAnswersInTime: the reservation is bounded,
// so the client gets a 503 rather than waiting for its own timeout.
func TestMiddleware_UnreachableLedgerAnswersInTime(t *testing.T) {
	f := newFixture(t, hanging{memledger.New("c")}, func(o *idempotency.Options) {
		o.Development, o.ReserveTimeout = false, 50*time.Millisecond
	})
	// Without the bound this request would never be answered.
	rec := f.do(t, "/things/a", "k1", `{}`)
	wantProblem(t, "POST with the ledger not answering", rec, http.StatusServiceUnavailable, problem.Unavailable)
	if got := rec.Header().Get("Retry-After"); got != problem.RetryAfterSeconds {
		t.Errorf("503 Retry-After = %q, want %q", got, problem.RetryAfterSeconds)
	}
	f.wantCalls(t, 0)
}

func TestMiddleware_BodyTooLarge(t *testing.T) {
	f := newFixture(t, nil, func(o *idempotency.Options) { o.MaxBodyBytes = 10 })
	p := wantProblem(t, "POST with an 11-byte body", f.do(t, "/things/a", "k1", `{"x":"abc"}`), http.StatusRequestEntityTooLarge, problem.BodyTooLarge)
	// The same 413 as every other route's, naming the limit.
	if want := problem.TooLarge(10); p.Detail != want.Detail || len(p.Errors) != 1 || p.Errors[0] != want.Errors[0] {
		t.Errorf("413 problem %+v, want detail %q and errors %+v", p, want.Detail, want.Errors)
	}
	f.wantCalls(t, 0)
}

func TestMiddleware_AfterHandlerRunsBeforeCompletion(t *testing.T) {
	var state idempotency.State
	var f *fixture
	f = newFixture(t, nil, func(o *idempotency.Options) {
		o.AfterHandler = func(c echo.Context) {
			r, err := f.ledger.Get(c.Request().Context(), ledgerID("k1"))
			if err != nil {
				t.Errorf("AfterHandler: Get: %v", err)
			}
			state = r.State
		}
	})
	wantStatus(t, "POST", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
	if state != idempotency.StateInProgress {
		t.Errorf("row state in AfterHandler = %q, want in_progress (the failpoint sits between the write and the completion)", state)
	}
}
