package api

import (
	"context"
	"errors"
	"net/http"
	"slices"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// auth admits requests whose "Authorization: Bearer <key>" names a key with
// one of roles (admin is always admitted): 401 without a known key, 403 for
// another role. Routes with an :agentId or :walletId parameter also refuse
// a reader key that does not list that account (403).
func (s *Server) auth(roles ...apikey.Role) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			raw, ok := apikey.FromBearer(c.Request().Header.Get(echo.HeaderAuthorization))
			if !ok {
				return &Error{Status: http.StatusUnauthorized, Kind: problem.Unauthorized,
					Detail: "send an API key as Authorization: Bearer <key>"}
			}
			if portal.IsToken(raw) {
				return s.authPortal(c, raw, next) // portal_auth.go
			}
			k, ok := s.keys.Lookup(raw)
			if !ok {
				return &Error{Status: http.StatusUnauthorized, Kind: problem.Unauthorized, Detail: "unknown API key"}
			}
			if k.Role != apikey.RoleAdmin && !slices.Contains(roles, k.Role) {
				return &Error{Status: http.StatusForbidden, Kind: problem.Forbidden,
					Detail: "the " + string(k.Role) + " role may not use this route"}
			}
			scopeOf(c).setKey(k)
			if agent, err := routeAccount(c); err != nil || (agent != "" && !k.MayRead(agent)) {
				return &Error{Status: http.StatusForbidden, Kind: problem.Forbidden,
					Detail: "this key may not read that agent"}
			}
			return s.afterAuth(c, next)
		}
	}
}

// routeAccount is the account a route is about: its :agentId or :walletId
// parameter (unescaped), or "" for a route with neither.
func routeAccount(c echo.Context) (string, error) {
	if c.Param("walletId") != "" {
		return paramValue(c, "walletId")
	}
	return paramValue(c, "agentId")
}

// keyOf returns the key that authenticated the request.
func keyOf(c echo.Context) (*apikey.Key, bool) {
	k := scopeOf(c).key
	return k, k != nil
}

// PrincipalOf returns the ID of the API key that authenticated the request,
// or "" when none did. Config.RouteMiddleware runs after authentication, so
// it may use this as the verified caller (for example in an idempotency
// fingerprint).
func PrincipalOf(c echo.Context) string {
	if k, ok := keyOf(c); ok {
		return k.ID
	}
	return ""
}

// getOwned answers GET of the document :id that get reads. A missing
// document and, for a reader key, another agent's document (agentOf tells
// whose it is) get the same 404, so readers learn nothing about other agents.
func getOwned[T any](c echo.Context, what string, get func(context.Context, string) (T, error), agentOf func(*T) string) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	doc, err := get(storeCtx(c), id)
	if errors.Is(err, store.ErrNotFound) {
		return NotFound(what + " not found")
	}
	if err != nil {
		return err
	}
	if k, ok := keyOf(c); ok && !k.MayRead(agentOf(&doc)) {
		return NotFound(what + " not found")
	}
	return c.JSON(http.StatusOK, doc)
}

// changeByID answers POST (or DELETE) of an action on the document :id
// (revoke…): an optional empty body, then change, whose document is the
// answer.
func changeByID[T any](s *Server, c echo.Context, change func(context.Context, string) (T, error)) error {
	id, _, err := withBody[emptyBody](c, idParam, s.decodeOptional)
	if err != nil {
		return err
	}
	doc, err := change(storeCtx(c), id)
	return answer(c, http.StatusOK, doc, err)
}
