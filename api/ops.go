package api

import (
	"context"
	_ "embed"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/receipt"
)

// OpenAPI is the service's OpenAPI 3.1 document, served at /openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) registerOps(e group) {
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", func(c echo.Context) error {
		return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, OpenAPI)
	})
	e.GET("/.well-known/jwks.json", s.jwks)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})))
}

type statusBody struct {
	Status string `json:"status"`
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, statusBody{Status: "ok"})
}

// readyProbe is a bounded, non-mutating probe of something the service
// needs, and what /readyz says when it fails.
type readyProbe struct {
	probe  func(context.Context) error
	detail string
}

// readyz probes what the service needs without writing (s.probes: the
// idempotency ledger, UseLedger; then the store), one after the other, all
// within s.ready, and fails closed: any error or a timeout is 503.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), s.ready)
	defer cancel()
	for _, p := range s.probes {
		if err := p.probe(ctx); err != nil {
			return &Error{Status: http.StatusServiceUnavailable, Kind: problem.Unavailable, Detail: p.detail, Err: err}
		}
	}
	if err := s.store.Ping(ctx); err != nil {
		return &Error{Status: http.StatusServiceUnavailable, Kind: problem.Unavailable,
			Detail: "the store did not answer the readiness probe", Err: err}
	}
	return c.JSON(http.StatusOK, statusBody{Status: "ready"})
}

// jwks serves the signer's public keys (an empty set without a signer).
func (s *Server) jwks(c echo.Context) error {
	set := receipt.JWKS{Keys: []receipt.JWK{}}
	if s.signer != nil {
		set = s.signer.JWKS()
	}
	c.Response().Header().Set(echo.HeaderCacheControl, "public, max-age=300")
	return c.JSON(http.StatusOK, set)
}
