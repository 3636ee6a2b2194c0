package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/labstack/echo/v4/middleware"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// HeaderRequestID carries the request ID, in requests (kept if well formed)
// and in every response.
const HeaderRequestID = "X-Request-Id"

// requestIDs makes request IDs: a random per-process prefix and a counter,
// unique without a random read per request.
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &requestIDs{prefix: hex.EncodeToString(b[:]) + "-"}
}

func (r *requestIDs) next() string {
	var b [32]byte
	return string(strconv.AppendUint(append(b[:0], r.prefix...), r.n.Add(1), 36))
}

func printableASCII(s string, max int) bool {
	if len(s) == 0 || len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// metrics are the service's Prometheus collectors.
type metrics struct {
	latency        *prometheus.HistogramVec
	consumeResults *prometheus.CounterVec
	storeErrors    *prometheus.CounterVec
	// The series of latency and consumeResults, found once per label
	// values: WithLabelValues hashes and looks them up on every call.
	latencySeries series[latencyLabels, prometheus.Observer]
	resultSeries  series[[3]string, prometheus.Counter]
}

// latencyLabels are the label values of a latency series.
type latencyLabels struct {
	route, method string
	status        int
}

// series keeps the series of a metric vector by their label values K,
// made by with on first use. Label values are bounded (routes, methods,
// statuses, outcomes, reasons), so it is too.
type series[K comparable, M any] struct {
	mu   sync.RWMutex
	m    map[K]M
	with func(K) M
}

func (s *series[K, M]) get(k K) M {
	s.mu.RLock()
	m, ok := s.m[k]
	s.mu.RUnlock()
	if ok {
		return m
	}
	m = s.with(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[K]M{}
	}
	s.m[k] = m
	return m
}

// observeLatency records one request's latency.
func (m *metrics) observeLatency(route, method string, status int, d time.Duration) {
	m.latencySeries.get(latencyLabels{route, method, status}).Observe(d.Seconds())
}

// countResult counts one consume, check or authorize answer.
func (m *metrics) countResult(route, result, reason string) {
	m.resultSeries.get([3]string{route, result, reason}).Inc()
}

func newMetrics(r *prometheus.Registry) (*metrics, error) {
	m := &metrics{
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stipend_http_request_duration_seconds",
			Help:    "HTTP request latency by route template, method and status.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "status"}),
		consumeResults: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stipend_consume_results_total",
			Help: "Consume, check and authorize answers by result and, for denials, the main reason.",
		}, []string{"route", "result", "reason"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stipend_store_errors_total",
			Help: "Store errors that reached the HTTP layer, by store error code.",
		}, []string{"code"}),
	}
	m.latencySeries.with = func(l latencyLabels) prometheus.Observer {
		return m.latency.WithLabelValues(l.route, l.method, statusLabel(l.status))
	}
	m.resultSeries.with = func(l [3]string) prometheus.Counter { return m.consumeResults.WithLabelValues(l[:]...) }
	// Every code's series exists from the start at 0, so a rate or an alert
	// on it works before the first error of that code.
	for _, code := range store.Codes() {
		m.storeErrors.WithLabelValues(string(code))
	}
	for _, c := range []prometheus.Collector{m.latency, m.consumeResults, m.storeErrors} {
		if err := r.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// methodLabel bounds the method label: HTTP lets a client send any token
// as a method, and each new label value would be a new metric series.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// observe records the latency metric and writes one JSON access log line
// per request. It never logs headers or bodies, so API keys and
// idempotency keys stay out of the logs.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		route := c.Path()
		if err != nil {
			if errors.Is(err, echo.ErrNotFound) {
				route = "unmatched"
			}
			c.Error(err) // answers now, so the status below is the real one
		}
		elapsed := time.Since(start)
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		req := c.Request()
		s.metrics.observeLatency(route, methodLabel(req.Method), status, elapsed)
		level := slog.LevelInfo
		if status >= 500 {
			level = slog.LevelError
		}
		if s.log.Enabled(req.Context(), level) {
			attrs := [8]slog.Attr{ // an array: no allocation
				slog.String("requestId", requestIDOf(c)),
				slog.String("method", req.Method),
				slog.String("route", route),
				slog.Int("status", status),
				slog.Float64("durationMs", float64(elapsed.Microseconds())/1000),
				slog.Int64("bytesOut", c.Response().Size),
			}
			n := 6
			if k, ok := keyOf(c); ok {
				attrs[6], attrs[7] = slog.String("keyId", k.ID), slog.String("role", string(k.Role))
				n = 8
			}
			// Straight to the handler, without the caller's program
			// counter that Logger.LogAttrs walks the stack for: an access
			// log line has no source worth naming.
			r := slog.NewRecord(time.Now(), level, "request", 0)
			r.AddAttrs(attrs[:n]...)
			_ = s.log.Handler().Handle(req.Context(), r)
		}
		return nil
	}
}

var statusLabels = func() map[int]string {
	m := map[int]string{}
	for i := 100; i < 600; i++ {
		m[i] = strconv.Itoa(i)
	}
	return m
}()

func statusLabel(code int) string {
	if l, ok := statusLabels[code]; ok {
		return l
	}
	return strconv.Itoa(code)
}

// recoverPanic turns a panic in a handler into a 500 problem (logged with
// its stack by the error handler) instead of a dropped connection.
func recoverPanic(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				if r == http.ErrAbortHandler {
					panic(r)
				}
				err = &Error{Status: http.StatusInternalServerError, Kind: problem.Internal, Detail: "internal error",
					Err: fmt.Errorf("panic: %v\n%s", r, debug.Stack())}
			}
		}()
		return next(c)
	}
}

// corsRoutes are the reader routes browsers may call.
var corsRoutes = map[string]bool{
	"/v1/accounts/:agentId":              true,
	"/v1/accounts/:agentId/entitlements": true,
	"/v1/accounts/:agentId/consumptions": true,
	"/v1/accounts/:agentId/receipts":     true,
	"/v1/accounts/:agentId/balance":      true,
	"/v1/accounts/:agentId/usage":        true,
	"/v1/entitlements/:id":               true,
	"/v1/receipts/:id":                   true,
	"/.well-known/jwks.json":             true,
	// Shared wallets (wallets.go).
	"/v1/accounts/:agentId/wallets":           true,
	"/v1/wallets/:walletId/members":           true,
	"/v1/wallets/:walletId/members/:memberId": true,
}

func (s *Server) corsMiddleware() echo.MiddlewareFunc {
	return middleware.CORSWithConfig(middleware.CORSConfig{
		Skipper:       func(c echo.Context) bool { return !corsRoutes[c.Path()] },
		AllowOrigins:  s.cors,
		AllowMethods:  []string{http.MethodGet, http.MethodOptions},
		AllowHeaders:  []string{echo.HeaderAuthorization, echo.HeaderContentType, HeaderRequestID},
		ExposeHeaders: []string{HeaderRequestID},
		MaxAge:        600,
	})
}
