package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/portal"
)

// registerPortalSessions routes portal sessions (docs/portal.md): billing
// and admin keys mint and revoke them; a session's own token reads what it
// is (GET /v1/portal/session). A top-up Checkout of an agent's credits
// (POST /v1/accounts/{agentId}/checkout) is for billing keys and the
// agent's sessions. Which routes a session may call is portalRoutes
// (portal_auth.go).
func (s *Server) registerPortalSessions(g group) {
	billing := s.auth(apikey.RoleBilling)
	g.POST("/portal-sessions", s.createPortalSession, billing)
	g.GET("/portal-sessions/:id", s.getPortalSession, billing)
	g.POST("/portal-sessions/:id/revoke", s.revokePortalSession, billing)
	g.add(http.MethodDelete, "/portal-sessions/:id", s.revokePortalSession, billing)
	g.GET("/portal/session", s.portalWhoAmI, s.portalOnly)
	g.POST("/accounts/:agentId/checkout", s.accountCheckout, billing)
}

// portalSessionBody is the body of POST /v1/portal-sessions.
type portalSessionBody struct {
	AgentID string `json:"agentId" validate:"required,name"`
	// TTLSeconds is how long the session lasts: default 3600, 60 to 86400.
	TTLSeconds int64 `json:"ttlSeconds" validate:"omitempty,min=60,max=86400"`
}

// portalSessionAnswer is a portal session as the API shows it; Token and
// URL only in the answer that minted it (and its replays).
type portalSessionAnswer struct {
	portal.Session
	Token string `json:"token,omitempty"`
	URL   string `json:"url,omitempty"`
}

func (s *Server) createPortalSession(c echo.Context) error {
	// The ledger checks the key first; this route needs one even without a ledger.
	_, b, err := withBody[portalSessionBody](c, idempotencyKey, s.decode)
	if err != nil {
		return err
	}
	ttl := portal.DefaultTTL
	if b.TTLSeconds != 0 {
		ttl = time.Duration(b.TTLSeconds) * time.Second
	}
	ps, token, err := portal.New(b.AgentID, PrincipalOf(c), s.now(), ttl)
	if err != nil {
		return err
	}
	ps, err = s.store.CreatePortalSession(storeCtx(c), ps)
	return answer(c, http.StatusCreated, portalSessionAnswer{Session: ps, Token: token, URL: s.portalURL(c, token)}, err)
}

// portalURL is the page of a session: /portal?session=<token>.
func (s *Server) portalURL(c echo.Context, token string) string {
	return s.portalPage(c) + "?session=" + url.QueryEscape(token)
}

// portalPage is the URL of /portal on Config.PublicURL, or on the origin
// the request came to.
func (s *Server) portalPage(c echo.Context) string {
	base := s.publicURL
	if base == "" {
		base = c.Scheme() + "://" + c.Request().Host
	}
	return base + "/portal"
}

func (s *Server) getPortalSession(c echo.Context) error {
	return getOwned(c, "portal session", s.store.GetPortalSession, func(ps *portal.Session) string { return ps.AgentID })
}

// revokePortalSession is POST /v1/portal-sessions/{id}/revoke and DELETE
// /v1/portal-sessions/{id}: from now on the session's token is refused.
// Revoking twice answers the session as it is.
func (s *Server) revokePortalSession(c echo.Context) error {
	return changeByID(s, c, func(ctx context.Context, id string) (portal.Session, error) {
		return s.store.RevokePortalSession(ctx, id, s.now())
	})
}

// portalWhoAmI is GET /v1/portal/session: the session the token is (the
// page reads its agent from it) and whether it can start a Checkout.
func (s *Server) portalWhoAmI(c echo.Context) error {
	ps := sessionOf(c)
	return c.JSON(http.StatusOK, struct {
		portal.Session
		Checkout bool `json:"checkout"`
	}{*ps, s.stripe != nil})
}

// accountCheckoutBody is the body of POST /v1/accounts/{agentId}/checkout.
type accountCheckoutBody struct {
	Amount *money.Money `json:"amount" validate:"required"`
	// SaveForTopUp saves the payer's card for the agent's auto top-up.
	SaveForTopUp bool `json:"saveForTopUp"`
}

// accountCheckout is POST /v1/accounts/{agentId}/checkout: a Checkout
// Session that buys credits of any service ({"service": "*"}) for the
// agent and comes back to the portal page (the wallet's top-up button).
// The Idempotency-Key is kept apart from the keys of POST
// /v1/checkout-sessions and of other callers: it is hashed with the
// caller's identity (the API key's ID, or the portal session's).
func (s *Server) accountCheckout(c echo.Context) error {
	agent, err := agentParam(c)
	if err != nil {
		return err
	}
	key, b, err := withBody[accountCheckoutBody](c, idempotencyKey, s.decode)
	if err != nil {
		return err
	}
	back := s.portalPage(c)
	body := checkoutBody{
		AgentID: agent, Amount: b.Amount, Description: "Top-up from the wallet",
		Grant:        &grantBody{Type: entitlement.TypeCredits, Scope: scopeBody{Service: "*"}},
		SuccessURL:   back + "?checkout=success",
		CancelURL:    back + "?checkout=cancelled",
		SaveForTopUp: b.SaveForTopUp,
	}
	if err := body.Validate(); err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(PrincipalOf(c) + "\x00" + key))
	return s.startCheckout(c, "wallet-"+hex.EncodeToString(sum[:]), &body)
}
