// Package api is Stipend's REST service on echo v4: routes, API-key auth by
// role, strict request decoding, RFC 9457 problem+json errors, request IDs,
// access logs, Prometheus metrics and the OpenAPI document.
//
// Routes are grouped by subject, each in its own file with a register
// method (registerConsume, registerAccounts, …) that routes calls. A new
// group of routes is a new file with its register method and one line in
// routes. Handlers use the package's own helpers: s.auth for roles,
// s.decode for bodies, Invalid/NotFound/*Error for problems, page for lists.
package api

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/stripepay"
)

// DefaultBodyLimit is the largest request body accepted when Config.BodyLimit is 0.
const DefaultBodyLimit = 64 << 10

// ReceiptSigner signs receipts and publishes the keys that verify them.
// receipt.Keyring implements it.
type ReceiptSigner interface {
	// Sign returns the compact JWS of r. It must be pure: stores may call it
	// more than once for one receipt.
	Sign(r receipt.Receipt) (string, error)
	// JWKS returns every public key that verifies receipts (served at
	// /.well-known/jwks.json).
	JWKS() receipt.JWKS
}

// Config is what New needs. Store and Keys are required.
type Config struct {
	Store store.EntitlementStore
	Keys  *apikey.Set
	// Signer signs payment and refund receipts; its keys are served at
	// /.well-known/jwks.json. Required outside development; without it,
	// completing or refunding a payment answers 503.
	Signer ReceiptSigner
	// Issuer is the receipts' issuer; default "stipend".
	Issuer string
	// Logger receives access logs and internal errors; nil discards them.
	Logger *slog.Logger
	// Registry receives the metrics; nil makes a new one. It is served at /metrics.
	Registry *prometheus.Registry
	// CORSOrigins may call the reader routes from a browser ("*" for any).
	CORSOrigins []string
	// Development relaxes the production requirements (a Signer).
	Development bool
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// BodyLimit bounds request bodies in bytes; 0 means DefaultBodyLimit.
	BodyLimit int64
	// ReadyTimeout bounds the store probe of /readyz; 0 means 2 s.
	ReadyTimeout time.Duration
	// StoreTimeout bounds the store calls of each request, counted from
	// its arrival (see requestScope); 0 means DefaultStoreTimeout.
	StoreTimeout time.Duration
	// RouteMiddleware, if set, is asked once per authenticated route
	// (method and path template, e.g. "POST", "/v1/payments/:id/refund"),
	// on the route's first authenticated request, for middleware to run
	// after authentication and before the handler. It applies to every
	// route that uses Server.auth, whichever file registers it. The request
	// idempotency ledger hooks in here.
	RouteMiddleware func(method, path string) []echo.MiddlewareFunc
	// Webhooks, if set, adds the webhook endpoint, delivery and Stripe routes (webhooks.go).
	Webhooks *WebhookConfig
	// Stripe, if set, makes the Stripe objects of payments: Checkout
	// Sessions (POST /v1/checkout-sessions) and the PaymentIntent of a
	// stripe payment created without one (stripe.go).
	Stripe *stripepay.Client
	// PublicURL is where clients reach this server (scheme and host, no
	// trailing slash), for the URLs of portal sessions; empty: the origin
	// of each minting request.
	PublicURL string
	// PortalFrameAncestors may frame the portal page (CSP
	// frame-ancestors sources, e.g. "https://app.example.com"); empty:
	// no one.
	PortalFrameAncestors []string
	// TopUps, if set, is told every credits entitlement a charge leaves,
	// so an account whose credits fall below its auto top-up threshold is
	// topped up (api/topup.go).
	TopUps *stripepay.TopUps
}

// Server is the REST service.
type Server struct {
	echo      *echo.Echo
	store     store.EntitlementStore
	keys      *apikey.Set
	signer    ReceiptSigner
	issuer    string
	log       *slog.Logger
	registry  *prometheus.Registry
	metrics   *metrics
	validate  *validator.Validate
	now       func() time.Time
	bodyLimit int64
	ready     time.Duration
	timeout   time.Duration
	ids       *requestIDs
	cors      []string
	routeMW   func(method, path string) []echo.MiddlewareFunc
	stripe    *stripepay.Client
	topUps    *stripepay.TopUps
	chains    sync.Map // "METHOD path" → echo.HandlerFunc: next wrapped in routeMW's middleware
	// middleware is every request's, outermost first; routed holds the
	// routes registered with it composed in (Server.handle).
	middleware []echo.MiddlewareFunc
	routed     map[routeKey]bool
	probes     []readyProbe // /readyz's before the store's (ops.go)
	// publicURL and frameAncestors are Config.PublicURL and
	// Config.PortalFrameAncestors (portal_sessions.go, portal_page.go).
	publicURL      string
	frameAncestors []string
}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	switch {
	case cfg.Store == nil:
		return nil, errors.New("api: Config.Store is required")
	case cfg.Keys == nil:
		return nil, errors.New("api: Config.Keys is required")
	case cfg.Signer == nil && !cfg.Development:
		return nil, errors.New("api: Config.Signer is required outside development")
	case cfg.BodyLimit < 0:
		return nil, errors.New("api: Config.BodyLimit must not be negative")
	case cfg.StoreTimeout < 0:
		return nil, errors.New("api: Config.StoreTimeout must not be negative")
	}
	if err := checkPortalConfig(cfg.PublicURL, cfg.PortalFrameAncestors); err != nil {
		return nil, err
	}
	s := &Server{
		store: cfg.Store, keys: cfg.Keys, signer: cfg.Signer, issuer: cfg.Issuer,
		log: cfg.Logger, registry: cfg.Registry, now: cfg.Now, bodyLimit: cfg.BodyLimit,
		ready: cfg.ReadyTimeout, timeout: cfg.StoreTimeout, validate: newValidator(), ids: newRequestIDs(),
		cors: cfg.CORSOrigins, routeMW: cfg.RouteMiddleware, stripe: cfg.Stripe,
	}
	s.topUps = cfg.TopUps
	s.publicURL, s.frameAncestors = strings.TrimSuffix(cfg.PublicURL, "/"), cfg.PortalFrameAncestors
	if s.issuer == "" {
		s.issuer = "stipend"
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.registry == nil {
		s.registry = prometheus.NewRegistry()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.bodyLimit == 0 {
		s.bodyLimit = DefaultBodyLimit
	}
	if s.ready == 0 {
		s.ready = 2 * time.Second
	}
	if s.timeout == 0 {
		s.timeout = DefaultStoreTimeout
	}
	m, err := newMetrics(s.registry)
	if err != nil {
		return nil, err
	}
	s.metrics = m

	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.handleError
	s.middleware = []echo.MiddlewareFunc{s.requestScope, s.observe, recoverPanic, checkQuery, portalCORS} // portalCORS: portal_auth.go
	if len(s.cors) > 0 {
		s.middleware = append(s.middleware, s.corsMiddleware())
	}
	s.routed = map[routeKey]bool{}
	e.Use(s.unrouted)
	s.echo = e
	s.routes()
	s.registerWebhooks(cfg.Webhooks)
	return s, nil
}

// routes registers every route group. Add a group with one line here.
func (s *Server) routes() {
	s.registerOps(group{s: s})
	v1 := group{s: s, prefix: "/v1"}
	s.registerConsume(v1)
	s.registerHolds(v1)
	s.registerRefunds(v1)
	s.registerAccounts(v1)
	s.registerLimits(v1)
	s.registerPayments(v1)
	s.registerReceipts(v1)
	s.registerStripe(v1)
	s.registerUsage(v1)
	s.registerWallets(v1)
	s.registerTopUp(v1)
	s.registerPortalSessions(v1)
	s.registerPortalPage(group{s: s})
}

// group registers routes under a path prefix.
type group struct {
	s      *Server
	prefix string
}

func (g group) add(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.s.handle(method, g.prefix+path, h, m...)
}

// GET registers a GET route.
func (g group) GET(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodGet, path, h, m...)
}

// POST registers a POST route.
func (g group) POST(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPost, path, h, m...)
}

// PUT registers a PUT route.
func (g group) PUT(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPut, path, h, m...)
}

// PATCH registers a PATCH route.
func (g group) PATCH(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodPatch, path, h, m...)
}

// DELETE registers a DELETE route.
func (g group) DELETE(path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	g.add(http.MethodDelete, path, h, m...)
}

// routeKey names a registered route: its method and path template.
type routeKey struct{ method, path string }

// handle registers h for method and path behind the route's middleware m
// and every request's (s.middleware), composed here once: echo composes
// the middleware given to Use and to Add anew for every request.
func (s *Server) handle(method, path string, h echo.HandlerFunc, m ...echo.MiddlewareFunc) {
	s.echo.Add(method, path, compose(compose(h, m), s.middleware))
	s.routed[routeKey{method, path}] = true
}

// compose wraps h in m, m[0] outermost, as echo does.
func compose(h echo.HandlerFunc, m []echo.MiddlewareFunc) echo.HandlerFunc {
	for i := len(m) - 1; i >= 0; i-- {
		h = m[i](h)
	}
	return h
}

// unrouted runs every request's middleware in front of what the router
// found for a request that no route registered with handle takes: a 404, a
// 405, the router's answer to OPTIONS, a route added through Echo().
func (s *Server) unrouted(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if s.routed[routeKey{c.Request().Method, c.Path()}] {
			return next(c) // composed in by handle
		}
		return compose(next, s.middleware)(c)
	}
}

// afterAuth runs next behind the Config.RouteMiddleware of the request's
// route. For one route, next is always the same handler, so the wrapped
// chain is built once and kept.
func (s *Server) afterAuth(c echo.Context, next echo.HandlerFunc) error {
	if s.routeMW == nil {
		return next(c)
	}
	key := c.Request().Method + " " + c.Path()
	if h, ok := s.chains.Load(key); ok {
		return h.(echo.HandlerFunc)(c)
	}
	h := next
	mws := s.routeMW(c.Request().Method, c.Path())
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	actual, _ := s.chains.LoadOrStore(key, h)
	return actual.(echo.HandlerFunc)(c)
}

// Handler returns the HTTP handler of every route. A HEAD request is
// served by the GET route of its path, as net/http's ServeMux serves it:
// the same authorization and status, and net/http sends the headers
// without the body.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodHead {
			// A copy: net/http drops the body of the response to the
			// original request, whose method stays HEAD.
			g := r.Clone(r.Context())
			g.Method = http.MethodGet
			r = g
		}
		s.echo.ServeHTTP(w, r)
	})
}

// Echo returns the underlying echo instance, for adding middleware or
// routes. A route added through it runs behind every request's middleware
// (unrouted); middleware added with its Use runs before Stipend's own on
// the routes of Server.
func (s *Server) Echo() *echo.Echo { return s.echo }

// handleError answers any error as problem+json. Internal errors are logged
// with their detail and shown only as "internal error" plus the request ID.
func (s *Server) handleError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	p, internal := problemOf(err)
	p.RequestID = requestIDOf(c)
	var se *store.Error
	if errors.As(err, &se) {
		s.metrics.storeErrors.WithLabelValues(string(se.Code)).Inc()
	}
	if p.Status == http.StatusServiceUnavailable && store.CodeOf(err) == store.CodeUnavailable {
		// The store did not answer: retrying (with the same key) is safe.
		c.Response().Header().Set(echo.HeaderRetryAfter, problem.RetryAfterSeconds)
	}
	if p.Status >= 500 && changedNothing(err) {
		idempotency.MarkUnchanged(c) // a route behind the ledger releases its key
	}
	if internal {
		s.log.LogAttrs(c.Request().Context(), slog.LevelError, "request failed",
			slog.String("requestId", p.RequestID), slog.String("route", c.Path()),
			slog.Int("status", p.Status), slog.String("error", err.Error()))
		if p.Status == http.StatusInternalServerError {
			p.Detail = "internal error (request " + p.RequestID + ")"
		}
	}
	if werr := writeProblem(c, p); werr != nil {
		s.log.Error("writing problem", "error", werr)
	}
}

// changedNothing reports whether a failed request certainly changed
// nothing: its store call failed and the store does not call the failure
// Uncertain, or the API refused it on its own (an *Error wrapping nothing,
// such as a missing signing key). A panic or any other failure may have
// come after a change.
func changedNothing(err error) bool {
	var se *store.Error
	if errors.As(err, &se) {
		return !store.IsUncertain(err)
	}
	var ae *Error
	return errors.As(err, &ae) && ae.Err == nil
}

// storeCtx is the context of a handler's store calls: the request's, which
// ends at the request's store deadline (requestScope), or earlier when the
// client goes away or the server shuts down.
func storeCtx(c echo.Context) context.Context { return c.Request().Context() }
