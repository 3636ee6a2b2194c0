package api

import (
	"errors"
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// portalRoutes are the routes a portal session's token is admitted on,
// besides GET /v1/portal/session: its account's balance, usage,
// consumptions and receipts, a Checkout top-up, the auto top-up settings,
// the wallets an agent belongs to and the members of a wallet (a session
// may be minted for a wallet as for an agent). On any
// other route, and for any other agent, the token is refused exactly as an
// unknown API key is (401), so a session learns nothing beyond its agent.
var portalRoutes = map[string]bool{
	"GET /v1/accounts/:agentId/balance":      true,
	"GET /v1/accounts/:agentId/usage":        true,
	"GET /v1/accounts/:agentId/consumptions": true,
	"GET /v1/accounts/:agentId/receipts":     true,
	"GET /v1/accounts/:agentId/topup":        true,
	"PUT /v1/accounts/:agentId/topup":        true,
	"DELETE /v1/accounts/:agentId/topup":     true,
	"POST /v1/accounts/:agentId/checkout":    true,
	"GET /v1/accounts/:agentId/wallets":      true,
	"GET /v1/wallets/:walletId/members":      true,
}

const sessionCtxKey = "stipend.portal"

// unknownKey is the refusal of a credential Stipend does not admit.
func unknownKey() *Error {
	return &Error{Status: http.StatusUnauthorized, Kind: problem.Unauthorized, Detail: "unknown API key"}
}

// authPortal admits a portal session's token raw on a route of
// portalRoutes for the session's own agent, while the session is neither
// expired nor revoked; it refuses everything else as an unknown key.
func (s *Server) authPortal(c echo.Context, raw string, next echo.HandlerFunc) error {
	if !portalRoutes[c.Request().Method+" "+c.Path()] {
		return unknownKey()
	}
	ps, err := s.portalSession(c, raw)
	if err != nil {
		return err
	}
	if agent, err := routeAccount(c); err != nil || agent != ps.AgentID {
		return unknownKey()
	}
	return s.afterAuth(c, next)
}

// portalOnly admits only a usable portal session's token: the route of
// the session itself (GET /v1/portal/session).
func (s *Server) portalOnly(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		raw, ok := apikey.FromBearer(c.Request().Header.Get(echo.HeaderAuthorization))
		if !ok {
			return &Error{Status: http.StatusUnauthorized, Kind: problem.Unauthorized,
				Detail: "send a portal session's token as Authorization: Bearer <token>"}
		}
		if !portal.IsToken(raw) {
			return unknownKey()
		}
		if _, err := s.portalSession(c, raw); err != nil {
			return err
		}
		return s.afterAuth(c, next)
	}
}

// portalSession finds the usable session of token raw and records it (and
// a portal key of its agent, for access logs and ownership checks) on c.
// A malformed, unknown, expired or revoked token is an unknown key.
func (s *Server) portalSession(c echo.Context, raw string) (*portal.Session, error) {
	id, ok := portal.IDOf(raw)
	if !ok {
		return nil, unknownKey()
	}
	ps, err := s.store.GetPortalSession(storeCtx(c), id)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, unknownKey()
		}
		return nil, err
	}
	if !ps.Matches(raw) || !ps.Usable(s.now()) {
		return nil, unknownKey()
	}
	scopeOf(c).setKey(apikey.Key{ID: "portal-" + ps.ID, Role: apikey.RolePortal, Agents: []string{ps.AgentID}})
	c.Set(sessionCtxKey, &ps)
	return &ps, nil
}

// sessionOf returns the portal session that authenticated the request;
// only for handlers behind portalOnly.
func sessionOf(c echo.Context) *portal.Session {
	return c.Get(sessionCtxKey).(*portal.Session)
}

// portalCORSRoutes are the paths (as routed) of portalCORS.
var portalCORSRoutes = func() map[string]bool {
	m := map[string]bool{"/v1/portal/session": true, "/.well-known/jwks.json": true}
	for r := range portalRoutes {
		_, path, _ := strings.Cut(r, " ")
		m[path] = true
	}
	return m
}()

// portalCORS lets a page of any origin (the wallet MCP App, which a host
// renders in a sandboxed frame) call the routes a portal session may call
// with its token: their preflights, and their answers to a portal token,
// say Access-Control-Allow-Origin: *. A bearer token is no ambient
// credential (no cookie), so allowing any origin gives a page nothing it
// does not already hold. It runs before Config.CORSOrigins' middleware,
// which answers the origins it lists in its own way.
func portalCORS(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if !portalCORSRoutes[c.Path()] {
			return next(c)
		}
		req, h := c.Request(), c.Response().Header()
		if req.Method == http.MethodOptions && req.Header.Get(echo.HeaderAccessControlRequestMethod) != "" {
			h.Set(echo.HeaderAccessControlAllowOrigin, "*")
			h.Set(echo.HeaderAccessControlAllowMethods, "GET, PUT, POST, DELETE")
			h.Set(echo.HeaderAccessControlAllowHeaders, "Authorization, Content-Type, Idempotency-Key")
			h.Set(echo.HeaderAccessControlMaxAge, "600")
		} else if raw, ok := apikey.FromBearer(req.Header.Get(echo.HeaderAuthorization)); (ok && portal.IsToken(raw)) || c.Path() == "/.well-known/jwks.json" {
			h.Set(echo.HeaderAccessControlAllowOrigin, "*")
			h.Set(echo.HeaderAccessControlExposeHeaders, HeaderRequestID)
		}
		return next(c)
	}
}
