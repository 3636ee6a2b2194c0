package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// ledgerAttempt returns an attempt for key on a test route with a fingerprint
// of body.
func ledgerAttempt(key, body string) idempotency.Attempt {
	route := "POST /v1/test"
	return idempotency.Attempt{
		ID:          idempotency.HashKey("conformance", route, key),
		Route:       route,
		Fingerprint: idempotency.Fingerprint("POST", route, []byte(body), "principal-1"),
		OperationID: "op-" + key,
		TraceID:     "trace-" + key,
	}
}

func ledgerResponse(body string) idempotency.Response {
	return idempotency.Response{
		Status: 201,
		Header: map[string][]string{"Content-Type": {"application/json"}},
		Body:   []byte(body),
	}
}

// ledgerMustReserve reserves a and fails unless the outcome is want.
func ledgerMustReserve(t *testing.T, l idempotency.Ledger, a idempotency.Attempt, want idempotency.Outcome) idempotency.Result {
	t.Helper()
	got, err := l.Reserve(context.Background(), a)
	if err != nil {
		t.Fatalf("Reserve(%s): %v", a.OperationID, err)
	}
	if got.Outcome != want {
		t.Fatalf("Reserve(%s).Outcome = %s, want %s", a.OperationID, got.Outcome, want)
	}
	if got.Record.ID != a.ID {
		t.Fatalf("Reserve(%s).Record.ID = %q, want %q", a.OperationID, got.Record.ID, a.ID)
	}
	if got.Record.UpdateTime.IsZero() {
		t.Fatalf("Reserve(%s).Record.UpdateTime is zero", a.OperationID)
	}
	return got
}

// CheckProbeUnreachable checks that Probe on l, a ledger whose backend
// (named by what) does not answer, fails closed: Unavailable, so /readyz
// reports the instance unready.
func CheckProbeUnreachable(t *testing.T, l idempotency.Ledger, what string) {
	t.Helper()
	err := l.Probe(context.Background())
	if got := store.CodeOf(err); got != store.CodeUnavailable {
		t.Errorf("Probe on an unreachable %s: got %v (code %q), want code %q", what, err, got, store.CodeUnavailable)
	}
}

// ledgerMustGet returns the row id or fails.
func ledgerMustGet(t *testing.T, l idempotency.Ledger, id string) idempotency.Record {
	t.Helper()
	return must(l.Get(context.Background(), id))(t, "Get(%s)", id)
}

var ledgerReserveTests = []ledgerTest{
	{"Reserve/CreatesInProgressRow", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{"a":1}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		got := ledgerMustGet(t, l, a.ID)
		want := idempotency.Record{
			ID: a.ID, Route: a.Route, Fingerprint: a.Fingerprint, State: idempotency.StateInProgress,
			OperationID: a.OperationID, TraceID: a.TraceID, CreatedAt: clock.Now(), UpdateTime: res.Record.UpdateTime,
			Token: res.Record.Token,
		}
		if res.Record.Token == "" {
			t.Errorf("Reserve().Record.Token is empty, want the reservation's token")
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Get after Reserve (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, res.Record); diff != "" {
			t.Errorf("Reserve().Record (-want +got):\n%s", diff)
		}
	}},
	{"Reserve/SecondAttemptSeesInProgress", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{"a":1}`)
		first := ledgerMustReserve(t, l, a, idempotency.Reserved)
		second := ledgerMustReserve(t, l, a, idempotency.InProgress)
		if got, want := second.Record.UpdateTime, first.Record.UpdateTime; !got.Equal(want) {
			t.Errorf("second Reserve: Record.UpdateTime = %v, want the winner's %v", got, want)
		}
	}},
	{"Reserve/DifferentFingerprintInProgressIsMismatch", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		ledgerMustReserve(t, l, ledgerAttempt("k1", `{"a":1}`), idempotency.Reserved)
		got := ledgerMustReserve(t, l, ledgerAttempt("k1", `{"a":2}`), idempotency.Mismatch)
		if got.Record.State != idempotency.StateInProgress {
			t.Errorf("Mismatch record state = %s, want %s", got.Record.State, idempotency.StateInProgress)
		}
	}},
	{"Reserve/DifferentFingerprintCompletedIsMismatch", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		res := ledgerMustReserve(t, l, ledgerAttempt("k1", `{"a":1}`), idempotency.Reserved)
		if err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		ledgerMustReserve(t, l, ledgerAttempt("k1", `{"a":2}`), idempotency.Mismatch)
	}},
	{"Reserve/InProgressNeverExpires", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{"a":1}`)
		ledgerMustReserve(t, l, a, idempotency.Reserved)
		clock.Advance(10 * 365 * 24 * time.Hour)
		ledgerMustReserve(t, l, a, idempotency.InProgress)
	}},
	{"Reserve/LongCorrelationIDsAreBounded", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		long := fmt.Sprintf("%0300d", 7)
		a.OperationID, a.TraceID = long, long
		ledgerMustReserve(t, l, a, idempotency.Reserved)
		got := ledgerMustGet(t, l, a.ID)
		if len(got.OperationID) != idempotency.MaxCorrelationLen || len(got.TraceID) != idempotency.MaxCorrelationLen {
			t.Errorf("stored id lengths = %d, %d, want %d", len(got.OperationID), len(got.TraceID), idempotency.MaxCorrelationLen)
		}
	}},
	{"Reserve/InvalidAttemptRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		a.ID = "raw-key-not-a-hash"
		_, err := l.Reserve(context.Background(), a)
		wantCode(t, "Reserve(unhashed id)", err, store.CodeInvalid)
	}},
	{"Get/Absent", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		_, err := l.Get(context.Background(), ledgerAttempt("none", "").ID)
		wantCode(t, "Get(absent)", err, store.CodeNotFound)
	}},
	{"Probe/Healthy", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		if err := l.Probe(context.Background()); err != nil {
			t.Errorf("Probe: %v", err)
		}
	}},
}

var ledgerCompleteTests = []ledgerTest{
	{"Complete/ThenReplay", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{"a":1}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		resp := ledgerResponse(`{"id":"x"}`)
		expire := clock.Now().Add(24 * time.Hour)
		if err := l.Complete(context.Background(), res.Reservation(), resp, expire); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		got := ledgerMustReserve(t, l, a, idempotency.Replay)
		if got.Record.State != idempotency.StateCompleted {
			t.Errorf("replayed record state = %s, want completed", got.Record.State)
		}
		if got.Record.Response == nil {
			t.Fatalf("replayed record has no response")
		}
		if diff := cmp.Diff(resp, *got.Record.Response); diff != "" {
			t.Errorf("replayed response (-want +got):\n%s", diff)
		}
		if !got.Record.ExpireAt.Equal(expire) || !got.Record.CompletedAt.Equal(clock.Now()) {
			t.Errorf("ExpireAt, CompletedAt = %v, %v, want %v, %v", got.Record.ExpireAt, got.Record.CompletedAt, expire, clock.Now())
		}
		// A returned copy must not alias the stored row.
		got.Record.Response.Body[0] = 'X'
		again := ledgerMustGet(t, l, a.ID)
		if string(again.Response.Body) != `{"id":"x"}` {
			t.Errorf("stored body changed through a returned copy: %q", again.Response.Body)
		}
	}},
	{"Complete/StaleReservationRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{"a":1}`)
		first := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Release(context.Background(), first.Reservation()); err != nil {
			t.Fatalf("Release: %v", err)
		}
		second := ledgerMustReserve(t, l, a, idempotency.Reserved)
		err := l.Complete(context.Background(), first.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour))
		wantCode(t, "Complete(stale reservation)", err, store.CodeConflict)
		if got := ledgerMustGet(t, l, a.ID); got.State != idempotency.StateInProgress || !got.UpdateTime.Equal(second.Record.UpdateTime) {
			t.Errorf("after a stale Complete: state %s, update time %v; want in_progress, %v", got.State, got.UpdateTime, second.Record.UpdateTime)
		}
	}},
	{"Complete/TwiceRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		res := ledgerMustReserve(t, l, ledgerAttempt("k1", `{}`), idempotency.Reserved)
		if err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{"n":1}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("first Complete: %v", err)
		}
		err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{"n":2}`), clock.Now().Add(time.Hour))
		wantCode(t, "second Complete with the same reservation", err, store.CodeConflict)
		if got := ledgerMustGet(t, l, res.Record.ID); string(got.Response.Body) != `{"n":1}` {
			t.Errorf("stored body = %s, want the first completion's", got.Response.Body)
		}
	}},
	{"Complete/ExpiredResultNotReplayed", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{"a":1}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		expire := clock.Now().Add(time.Hour)
		if err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), expire); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		clock.Set(expire)
		if got := ledgerMustGet(t, l, a.ID); !got.Expired(clock.Now()) {
			t.Errorf("Record.Expired(%v) = false at ExpireAt, want true", clock.Now())
		}
		// The row may still be there (TTL deletion is asynchronous), but it
		// must not be replayed: the key reserves afresh, even for a new body.
		next := ledgerMustReserve(t, l, ledgerAttempt("k1", `{"a":2}`), idempotency.Reserved)
		if next.Record.Response != nil || next.Record.State != idempotency.StateInProgress {
			t.Errorf("new reservation over an expired row: state %s, response %v", next.Record.State, next.Record.Response)
		}
	}},
	{"Complete/OversizeResponseStaysInProgress", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		big := ledgerResponse(fmt.Sprintf(`{"pad":"%0*d"}`, idempotency.MaxResponseBytes, 0))
		err := l.Complete(context.Background(), res.Reservation(), big, clock.Now().Add(time.Hour))
		if !errors.Is(err, idempotency.ErrResponseTooLarge) {
			t.Fatalf("Complete(%d-byte response): got %v, want ErrResponseTooLarge", big.Size(), err)
		}
		wantCode(t, "Complete(oversize)", err, store.CodeInvalid)
		got := ledgerMustGet(t, l, a.ID)
		if got.State != idempotency.StateInProgress || !got.UpdateTime.Equal(res.Record.UpdateTime) {
			t.Errorf("after oversize Complete: state %s, update time %v; want the untouched reservation", got.State, got.UpdateTime)
		}
		ledgerMustReserve(t, l, a, idempotency.InProgress)
	}},
	{"Complete/LargestResponseFits", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		res := ledgerMustReserve(t, l, ledgerAttempt("k1", `{}`), idempotency.Reserved)
		resp := ledgerResponse("")
		resp.Body = []byte(fmt.Sprintf(`{"pad":"%0*d"}`, idempotency.MaxResponseBytes-resp.Size()-20, 0))
		if n := resp.Size(); n > idempotency.MaxResponseBytes || n < idempotency.MaxResponseBytes-64 {
			t.Fatalf("test setup: response size %d, want just under %d", n, idempotency.MaxResponseBytes)
		}
		if err := l.Complete(context.Background(), res.Reservation(), resp, clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete(%d-byte response): %v", resp.Size(), err)
		}
		if got := ledgerMustGet(t, l, res.Record.ID); len(got.Response.Body) != len(resp.Body) {
			t.Errorf("stored body length = %d, want %d", len(got.Response.Body), len(resp.Body))
		}
	}},
	{"Release/OnlyByOwner", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		other := idempotency.Reservation{ID: a.ID, Token: res.Record.Token + "-other"}
		wantCode(t, "Release(someone else's token)", l.Release(context.Background(), other), store.CodeConflict)
		ledgerMustGet(t, l, a.ID)
		if err := l.Release(context.Background(), res.Reservation()); err != nil {
			t.Fatalf("Release by the owner: %v", err)
		}
		_, err := l.Get(context.Background(), a.ID)
		wantCode(t, "Get after Release", err, store.CodeNotFound)
		ledgerMustReserve(t, l, a, idempotency.Reserved)
		wantCode(t, "Release(the old reservation) after a new one", l.Release(context.Background(), res.Reservation()), store.CodeConflict)
	}},
	{"Release/CompletedRowRefused", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("k1", `{}`)
		res := ledgerMustReserve(t, l, a, idempotency.Reserved)
		if err := l.Complete(context.Background(), res.Reservation(), ledgerResponse(`{}`), clock.Now().Add(time.Hour)); err != nil {
			t.Fatalf("Complete: %v", err)
		}
		wantCode(t, "Release after Complete", l.Release(context.Background(), res.Reservation()), store.CodeConflict)
		ledgerMustReserve(t, l, a, idempotency.Replay)
	}},
}

// ledgerConcurrencyTests: the case of RunLedgerConcurrencyTests.
var ledgerConcurrencyTests = []ledgerTest{
	{"Reserve/TwentyConcurrentOneWinner", func(t *testing.T, l idempotency.Ledger, clock *Clock) {
		a := ledgerAttempt("race", `{"a":1}`)
		const n = 20
		outcomes := make([]idempotency.Outcome, n)
		errs := make([]error, n)
		together(n, func(i int) {
			r, err := l.Reserve(context.Background(), a)
			outcomes[i], errs[i] = r.Outcome, err
		})
		counts := map[idempotency.Outcome]int{}
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("Reserve #%d: %v", i, errs[i])
			}
			counts[outcomes[i]]++
		}
		want := map[idempotency.Outcome]int{idempotency.Reserved: 1, idempotency.InProgress: n - 1}
		if diff := cmp.Diff(want, counts); diff != "" {
			t.Errorf("outcomes of %d concurrent Reserve calls (-want +got):\n%s", n, diff)
		}
	}},
}

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
