package idempotency_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func fenced(o *idempotency.Options) { o.Fenced = true }

// markFence does what a store's fenced change does to the ledger: it marks
// the request's reservation written (the memory store calls Mark under
// its lock).
func markFence(c echo.Context) error {
	f, ok := store.FenceOf(c.Request().Context()).(*memledger.Fence)
	if !ok {
		return errors.New("the handler's context carries no memory ledger fence")
	}
	return f.Mark()
}

// TestMiddleware_FenceInHandlerContext: on a fenced route the handler's
// context carries the reservation's fence; on another it carries none.
func TestMiddleware_FenceInHandlerContext(t *testing.T) {
	for _, on := range []bool{false, true} {
		var claim string
		f := newFixture(t, nil, func(o *idempotency.Options) { o.Fenced = on })
		f.handler = func(c echo.Context, n int64) error {
			if fc := store.FenceOf(c.Request().Context()); fc != nil {
				claim = fc.Claim()
			}
			return created(c, n)
		}
		wantStatus(t, "POST", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
		ref := f.ledger.Reference(ledgerID("k1"))
		if got := strings.HasPrefix(claim, ref+"#"); got != on {
			t.Errorf("Fenced %v: the handler's fence claims %q; want a claim on %s: %v", on, claim, ref, on)
		}
	}
}

// TestMiddleware_UnwrittenFencedRowIsReclaimed: a request that left its
// key in progress without writing (a 5xx of unknown outcome, a crash) is
// reclaimed by the next request with the key once ReclaimAfter has passed,
// and not before; that request runs.
func TestMiddleware_UnwrittenFencedRowIsReclaimed(t *testing.T) {
	f := newFixture(t, nil, fenced)
	f.handler = failFirst(http.StatusInternalServerError, "upstream timed out")
	wantStatus(t, "failing POST", f.do(t, "/things/a", "k1", `{}`), http.StatusInternalServerError)
	wantProblem(t, "retry at once", f.do(t, "/things/a", "k1", `{}`), http.StatusConflict, problem.IdempotencyKeyInProgress)
	f.clock.Advance(idempotency.DefaultReclaimAfter - time.Second)
	wantProblem(t, "retry just before the bound", f.do(t, "/things/a", "k1", `{}`), http.StatusConflict, problem.IdempotencyKeyInProgress)
	f.clock.Advance(time.Second)
	wantStatus(t, "retry after the bound", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
	wantStatus(t, "replay", f.do(t, "/things/a", "k1", `{}`), http.StatusCreated)
	f.wantCalls(t, 2)
	if !strings.Contains(f.logs.String(), "reclaimed") {
		t.Errorf("logs say nothing of the reclaim:\n%s", f.logs)
	}
}

// TestMiddleware_WrittenFencedRowStays: a request whose change was written
// (its fence marked) but whose answer was not recorded stays in progress
// however long it waits: only an operator settles it.
func TestMiddleware_WrittenFencedRowStays(t *testing.T) {
	f := newFixture(t, nil, fenced)
	f.handler = func(c echo.Context, n int64) error {
		if err := markFence(c); err != nil {
			return err
		}
		return echo.NewHTTPError(http.StatusInternalServerError, "the answer was lost after the change")
	}
	f.wantInProgressAYearLater(t, "POST whose change was written")
}

// TestMiddleware_UnfencedRowNeverReclaimed: without Fenced nothing proves
// an in-progress row unwritten, so it waits for an operator.
func TestMiddleware_UnfencedRowNeverReclaimed(t *testing.T) {
	f := newFixture(t, nil, nil)
	f.handler = func(c echo.Context, n int64) error {
		return echo.NewHTTPError(http.StatusInternalServerError, "upstream timed out")
	}
	f.wantInProgressAYearLater(t, "failing POST")
}

// wantInProgressAYearLater posts once (what names the call), expecting a
// 500, and fails unless a retry a year later still finds the key in
// progress and the handler ran once.
func (f *fixture) wantInProgressAYearLater(t *testing.T, what string) {
	t.Helper()
	wantStatus(t, what, f.do(t, "/things/a", "k1", `{}`), http.StatusInternalServerError)
	f.clock.Advance(365 * 24 * time.Hour)
	wantProblem(t, "retry a year later", f.do(t, "/things/a", "k1", `{}`), http.StatusConflict, problem.IdempotencyKeyInProgress)
	f.wantCalls(t, 1)
}

// TestMiddleware_ReclaimFencesOutTheLateHolder: the holder of a key is
// slower than its bound; a retry reclaims the key and runs. When the late
// holder's change comes, its fence fails, so the change is made once.
func TestMiddleware_ReclaimFencesOutTheLateHolder(t *testing.T) {
	f := newFixture(t, nil, fenced)
	entered, resume := make(chan struct{}), make(chan struct{})
	lateErr := make(chan error, 1)
	f.handler = func(c echo.Context, n int64) error {
		if n == 1 {
			close(entered)
			<-resume
			err := markFence(c)
			lateErr <- err
			if err != nil {
				idempotency.MarkUnchanged(c)
				return echo.NewHTTPError(http.StatusServiceUnavailable, err.Error())
			}
			return created(c, n)
		}
		if err := markFence(c); err != nil {
			return err
		}
		return created(c, n)
	}
	done := make(chan int)
	go func() { done <- f.do(t, "/things/a", "k1", `{}`).Code }()
	<-entered
	f.clock.Advance(idempotency.DefaultReclaimAfter)
	second := f.do(t, "/things/a", "k1", `{}`)
	wantStatus(t, "retry after the holder's bound", second, http.StatusCreated)
	close(resume)
	if err := <-lateErr; !errors.Is(err, store.ErrFenced) {
		t.Errorf("the late holder's change: got %v, want it refused with store.ErrFenced", err)
	}
	if got := <-done; got != http.StatusServiceUnavailable {
		t.Errorf("the late holder's answer: %d, want 503", got)
	}
	again := f.do(t, "/things/a", "k1", `{}`)
	wantStatus(t, "replay", again, http.StatusCreated)
	if again.Body.String() != second.Body.String() {
		t.Errorf("replay %s, want the retry's answer %s", again.Body, second.Body)
	}
}
