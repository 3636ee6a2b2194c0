package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/stripepay"
	"github.com/stipend-mcp/stipend/topup"
)

// registerTopUp routes an account's auto top-up (docs/stripe.md).
func (s *Server) registerTopUp(g group) {
	billing := s.auth(apikey.RoleBilling, apikey.RoleAdmin)
	g.PUT("/accounts/:agentId/topup", s.putTopUp, billing)
	g.GET("/accounts/:agentId/topup", getBy(agentParam, s.store.GetTopUp), billing)
	g.add(http.MethodDelete, "/accounts/:agentId/topup", s.deleteTopUp, billing)
}

// topUpBody is the body of PUT /v1/accounts/{agentId}/topup.
type topUpBody struct {
	Threshold *money.Money `json:"threshold" validate:"required"`
	Amount    *money.Money `json:"amount" validate:"required"`
	DailyCap  *money.Money `json:"dailyCap" validate:"required"`
	Scope     *scopeBody   `json:"scope" validate:"required"`
}

// settings checks b, also against what Stripe is known to refuse.
func (b *topUpBody) settings() (topup.Settings, error) {
	set := topup.Settings{
		Threshold: *b.Threshold, Amount: *b.Amount, DailyCap: *b.DailyCap,
		Scope: entitlement.Scope{Service: b.Scope.Service, Tools: b.Scope.Tools},
	}
	if err := set.Validate(); err != nil {
		return set, fieldErrorOf(err)
	}
	return set, fieldErrorOf(stripepay.CheckAmount(set.Amount))
}

func (s *Server) putTopUp(c echo.Context) error {
	agent, b, err := withBody[topUpBody](c, agentParam, s.decode)
	if err != nil {
		return err
	}
	set, err := b.settings()
	if err != nil {
		return err
	}
	t, err := s.store.PutTopUp(storeCtx(c), agent, set)
	if errors.Is(err, topup.ErrNoMethod) {
		return &Error{Status: http.StatusConflict, Kind: problem.Conflict,
			Detail: "top-up cannot be enabled: no payment method is saved for " + agent +
				"; its payer must first pay through a Checkout Session made with saveForTopUp: true", Err: err}
	}
	if err != nil {
		return err
	}
	s.topUps.Forget(agent)
	return c.JSON(http.StatusOK, t)
}

func (s *Server) deleteTopUp(c echo.Context) error {
	agent, _, err := withBody[emptyBody](c, agentParam, s.decodeOptional)
	if err != nil {
		return err
	}
	t, err := s.store.DisableTopUp(storeCtx(c), agent, "disabled by DELETE /v1/accounts/{agentId}/topup")
	if err != nil {
		return err
	}
	s.topUps.Forget(agent)
	return c.JSON(http.StatusOK, t)
}

// charged tells auto top-up (if configured) the entitlement a charge left.
func (s *Server) charged(e *entitlement.Entitlement) {
	if s.topUps != nil {
		s.topUps.Charged(e)
	}
}
