package idempotency

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/internal/fault"
	"github.com/stipend-mcp/stipend/internal/fence"
	"github.com/stipend-mcp/stipend/problem"
)

// DefaultRetention is how long a completed result is replayed when Options
// does not say.
const DefaultRetention = 24 * time.Hour

// DefaultReserveTimeout bounds a reservation when Options does not say.
const DefaultReserveTimeout = 10 * time.Second

// DefaultMaxBodyBytes bounds the request body the middleware reads to
// fingerprint it.
const DefaultMaxBodyBytes = 1 << 20

// completionTimeout bounds the ledger write after the handler. It runs on a
// context detached from the client's, so a client that hangs up does not
// leave a finished request in progress.
const completionTimeout = 10 * time.Second

// handlerTimeout bounds a handler that holds a reservation when the
// request's context has no deadline of its own. The handler runs on a
// context detached from the client's hang-up: a client that hangs up
// mid-way must not abort the change half-known, which would leave the key
// in progress until an operator looks; the change finishes and the
// client's retry gets the recorded answer. The request's deadline, which
// the server sets to bound its store calls, is kept: a stalled store then
// fails the handler in time (nothing changed, and the key is released,
// unless a commit was in flight).
const handlerTimeout = 30 * time.Second

// DefaultReclaimAfter is how old an unwritten fenced reservation must be
// before a request with its key tries to reclaim it, when Options does not
// say: the handler's bound and the completion's, so a live holder has
// finished by then. Reclaiming sooner is safe (the fence decides), but it
// would fail a holder that is merely slow.
const DefaultReclaimAfter = handlerTimeout + completionTimeout

// unchangedKey is the echo context key MarkUnchanged sets.
const unchangedKey = "idempotency.unchanged"

// MarkUnchanged tells the middleware that the request failed having changed
// nothing (its store call failed with a definite answer, or it was refused
// before any). On a 5xx answer the middleware then releases the key, so the
// client's retry runs the request again instead of getting 409 until an
// operator reconciles it. Handlers, or the server's error handler, call it.
func MarkUnchanged(c echo.Context) { c.Set(unchangedKey, true) }

// Options configures Middleware.
type Options struct {
	// Namespace is the deployment namespace: the first part of every hashed
	// key, so two deployments sharing a database never meet.
	Namespace string
	// Route names the route in the key's namespace. Empty means the method and
	// echo's route pattern ("POST /v1/payments/:id/refund"). The concrete
	// path, query and body are part of the fingerprint, not of the key.
	Route string
	// Principal returns the verified caller identity, which goes into the
	// fingerprint only: two callers reusing one key conflict (422). Nil means
	// no verified identity: the key is then a shared coordinate.
	Principal func(echo.Context) string
	// Development allows a ledger that is not durable. Outside development
	// such a ledger makes every request on the route a 503.
	Development bool
	// Retention is how long a completed result is replayed (DefaultRetention
	// when zero).
	Retention time.Duration
	// Now is the clock for expiries (time.Now when nil).
	Now func() time.Time
	// OperationID returns the operation id stored with a reservation and
	// shown on 409 (default: the response's X-Request-Id, else a new UUID).
	OperationID func(echo.Context) string
	// TraceID returns the trace id stored with a reservation (default: from
	// traceparent or X-Cloud-Trace-Context).
	TraceID func(echo.Context) string
	// MaxBodyBytes bounds the request body (DefaultMaxBodyBytes when zero);
	// a larger body is a 413 and reserves nothing.
	MaxBodyBytes int64
	// ReserveTimeout bounds the reservation (DefaultReserveTimeout when
	// zero): an unreachable ledger answers 503 in time rather than holding
	// the request until the client or the server gives up.
	ReserveTimeout time.Duration
	// Logger receives reconciliation-relevant events; it is given only
	// sanitized references and operation ids (slog.Default when nil).
	Logger *slog.Logger
	// Fenced says that the route's handler makes its change only through
	// store calls that check the reservation's fence (store.Fence): the
	// fenced methods of a store that checks the fences of ledger (the
	// memory store with memledger, the Firestore store with fsledger on one
	// database). The middleware then puts the fence in the handler's
	// context (store.WithFence), and an in-progress row that the fence
	// proves unwritten is reclaimed by the next request with its key, once
	// ReclaimAfter has passed. Without it, every in-progress row waits for
	// an operator.
	Fenced bool
	// ReclaimAfter is how long after its last change an unwritten fenced
	// row is reclaimed (DefaultReclaimAfter when zero). It decides only
	// when the proof is tried, never whether it holds.
	ReclaimAfter time.Duration
	// AfterHandler, when set, runs after the handler has answered and before
	// the ledger records the outcome. It is a test failpoint: a crash test
	// kills the process here to leave a committed write in progress.
	AfterHandler func(echo.Context)
	// BeforeHandler, when set, runs once the key is reserved and before the
	// handler. It is a test failpoint: a crash test kills the process here
	// to leave a reservation whose change never ran.
	BeforeHandler func(echo.Context)
}

func (o *Options) defaults() {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.OperationID == nil {
		o.OperationID = defaultOperationID
	}
	if o.TraceID == nil {
		o.TraceID = defaultTraceID
	}
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.ReserveTimeout <= 0 {
		o.ReserveTimeout = DefaultReserveTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.ReclaimAfter <= 0 {
		o.ReclaimAfter = DefaultReclaimAfter
	}
}

// Middleware makes a route require an Idempotency-Key and coordinates it
// through ledger, following the IETF Idempotency-Key draft:
//
//   - no key, or one ParseKey refuses: 400 naming the header;
//   - a body over MaxBodyBytes: 413, as the API's own;
//   - a request holding the key is in progress (or crashed): 409 with the
//     sanitized reference, the holder's operation id and Retry-After;
//   - the key was used with a different fingerprint: 422;
//   - the key completed and has not expired: the stored response, with
//     Idempotent-Replayed: true, and the handler does not run;
//   - otherwise the handler runs once, on a context the client's hang-up
//     does not cancel. A 2xx/3xx answer is stored for replay; a 4xx releases
//     the key (handlers on these routes must answer 4xx only before any
//     write), and so does a 5xx marked with MarkUnchanged; any other 5xx, a
//     panic, an answer too large to store, or a failed completion leaves the
//     key in progress for reconciliation;
//   - on a fenced route (Options.Fenced) the handler's context carries the
//     reservation's fence, and a key left in progress that the fence proves
//     unwritten is reclaimed by the next request with it once
//     Options.ReclaimAfter has passed; that request then runs.
//
// Ledger failures are 503 (unavailable, with Retry-After) or 500; outside development a ledger
// that is not durable is a 503 and the handler never runs.
func Middleware(ledger Ledger, opts Options) echo.MiddlewareFunc {
	opts.defaults()
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			return serve(c, next, ledger, &opts)
		}
	}
}

func serve(c echo.Context, next echo.HandlerFunc, ledger Ledger, opts *Options) error {
	if !opts.Development && !ledger.Durable() {
		return writeProblem(c, problem.New(http.StatusServiceUnavailable, problem.IdempotencyLedgerNotDurable,
			"this route requires a durable idempotency ledger outside development"))
	}
	key, err := ParseKey(c.Request().Header)
	var ke *KeyError
	if errors.As(err, &ke) {
		return writeProblem(c, ke.Problem())
	}
	body, p, ok := readBody(c.Request(), opts.MaxBodyBytes)
	if !ok {
		return writeProblem(c, p)
	}
	route := opts.Route
	if route == "" {
		route = c.Request().Method + " " + c.Path()
	}
	principal := ""
	if opts.Principal != nil {
		principal = opts.Principal(c)
	}
	attempt := Attempt{
		ID:          HashKey(opts.Namespace, route, key),
		Route:       route,
		Fingerprint: Fingerprint(c.Request().Method, c.Request().URL.RequestURI(), body, principal),
		OperationID: opts.OperationID(c),
		TraceID:     opts.TraceID(c),
		Fenced:      opts.Fenced,
	}
	ctx, cancel := context.WithTimeout(c.Request().Context(), opts.ReserveTimeout)
	res, err := reserve(ctx, ledger, opts, attempt)
	cancel()
	if err != nil {
		return ledgerFailure(c, opts, err, "reserve", ledger.Reference(attempt.ID))
	}
	switch res.Outcome {
	case Reserved:
		return runHeld(c, next, ledger, opts, res)
	case Replay:
		return replay(c, *res.Record.Response)
	case InProgress:
		p := problem.New(http.StatusConflict, problem.IdempotencyKeyInProgress,
			"a request with this Idempotency-Key is in progress or its outcome is unknown: retry later; if it persists, an operator must reconcile the reference")
		p.Reference, p.OperationID, p.TraceID = ledger.Reference(res.Record.ID), res.Record.OperationID, res.Record.TraceID
		c.Response().Header().Set(echo.HeaderRetryAfter, problem.RetryAfterSeconds)
		return writeProblem(c, p)
	default: // Mismatch
		return writeProblem(c, problem.New(http.StatusUnprocessableEntity, problem.IdempotencyKeyReused,
			"this Idempotency-Key was used for a different request (method, path, body or caller)"))
	}
}

// runHeld runs the handler while holding the reservation and records the
// outcome (see Middleware).
func runHeld(c echo.Context, next echo.HandlerFunc, ledger Ledger, opts *Options, res Result) error {
	ref := ledger.Reference(res.Record.ID)
	w := &capture{ResponseWriter: c.Response().Writer, limit: MaxResponseBytes}
	c.Response().Writer = w
	req := c.Request()
	deadline, ok := req.Context().Deadline()
	if !ok {
		deadline = time.Now().Add(handlerTimeout)
	}
	hctx, hcancel := context.WithDeadline(context.WithoutCancel(req.Context()), deadline)
	defer hcancel()
	if opts.Fenced {
		hctx = fence.With(hctx, ledger.Fence(res.Reservation()))
	}
	c.SetRequest(req.WithContext(hctx))
	if opts.BeforeHandler != nil {
		opts.BeforeHandler(c)
	}
	if err := next(c); err != nil {
		// Let the server's error handler answer now, so the status is known.
		c.Error(err)
	}
	if opts.AfterHandler != nil {
		opts.AfterHandler(c)
	}
	status := c.Response().Status
	log := opts.Logger.With(slog.String("reference", ref), slog.String("operationId", res.Record.OperationID), slog.Int("status", status))
	ctx, cancel := context.WithTimeout(context.WithoutCancel(c.Request().Context()), completionTimeout)
	defer cancel()
	switch {
	case status >= 400 && status < 500:
		if err := ledger.Release(ctx, res.Reservation()); err != nil {
			log.Warn("idempotency: releasing after a client error failed; the key stays in progress", slog.String("error", err.Error()))
		}
	case status >= 200 && status < 400:
		resp := Response{Status: status, Header: replayHeaders(c.Response().Header()), Body: w.body.Bytes()}
		if w.overflow {
			log.Warn("idempotency: response too large to replay; the key stays in progress for reconciliation")
			return nil
		}
		if err := ledger.Complete(ctx, res.Reservation(), resp, opts.Now().Add(opts.Retention)); err != nil {
			if errors.Is(err, ErrResponseTooLarge) {
				log.Warn("idempotency: response too large to replay; the key stays in progress for reconciliation")
			} else {
				log.Error("idempotency: completion failed after the handler succeeded; the key stays in progress for reconciliation", slog.String("error", err.Error()))
			}
		}
	case c.Get(unchangedKey) == true:
		if err := ledger.Release(ctx, res.Reservation()); err != nil {
			log.Warn("idempotency: releasing after a failure that changed nothing failed; the key stays in progress", slog.String("error", err.Error()))
		}
	default:
		log.Error("idempotency: the handler's outcome is uncertain; the key stays in progress for reconciliation")
	}
	return nil
}

// replayHeaders keeps the headers a replay must repeat.
func replayHeaders(h http.Header) map[string][]string {
	out := map[string][]string{}
	for _, name := range []string{echo.HeaderContentType, echo.HeaderLocation} {
		if v := h.Values(name); len(v) > 0 {
			out[name] = append([]string(nil), v...)
		}
	}
	return out
}

// replay answers a stored response.
func replay(c echo.Context, resp Response) error {
	h := c.Response().Header()
	for name, values := range resp.Header {
		h.Del(name)
		for _, v := range values {
			h.Add(name, v)
		}
	}
	h.Set(HeaderReplayed, "true")
	c.Response().WriteHeader(resp.Status)
	if c.Request().Method == http.MethodHead {
		return nil
	}
	_, err := c.Response().Write(resp.Body)
	return err
}

// ledgerFailure answers a ledger error: 503 when the store is unavailable
// (the write does not run), 500 otherwise.
func ledgerFailure(c echo.Context, opts *Options, err error, op, ref string) error {
	if fault.CodeOf(err) == fault.CodeUnavailable {
		opts.Logger.Warn("idempotency: ledger unavailable", slog.String("op", op), slog.String("reference", ref), slog.String("error", err.Error()))
		c.Response().Header().Set(echo.HeaderRetryAfter, problem.RetryAfterSeconds)
		return writeProblem(c, problem.New(http.StatusServiceUnavailable, problem.Unavailable,
			"the idempotency ledger is unavailable; the request was not run; retry with the same Idempotency-Key"))
	}
	opts.Logger.Error("idempotency: ledger failed", slog.String("op", op), slog.String("reference", ref), slog.String("error", err.Error()))
	return writeProblem(c, problem.New(http.StatusInternalServerError, problem.Internal,
		"internal error in the idempotency ledger; the request was not run"))
}

// readBody reads the whole request body (bounded) and puts it back for the
// handler.
func readBody(r *http.Request, limit int64) ([]byte, problem.Problem, bool) {
	if r.Body == nil {
		return nil, problem.Problem{}, true
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, problem.New(http.StatusBadRequest, problem.InvalidRequest, "reading the request body failed"), false
	}
	if int64(len(body)) > limit {
		return nil, problem.TooLarge(limit), false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, problem.Problem{}, true
}

func defaultOperationID(c echo.Context) string {
	if id := c.Response().Header().Get(echo.HeaderXRequestID); id != "" {
		return id
	}
	return uuid.NewString()
}

func defaultTraceID(c echo.Context) string {
	if tp := c.Request().Header.Get("traceparent"); tp != "" {
		if parts := strings.Split(tp, "-"); len(parts) == 4 {
			return parts[1]
		}
	}
	if cl := c.Request().Header.Get("X-Cloud-Trace-Context"); cl != "" {
		id, _, _ := strings.Cut(cl, "/")
		return id
	}
	return ""
}
