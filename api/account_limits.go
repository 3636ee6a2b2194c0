package api

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// accountLimitsBody is the body of PUT /v1/accounts/{agentId}/limits: the
// account-wide limits, replaced whole ({} removes them).
type accountLimitsBody struct {
	MaxPerCall      []money.Money `json:"maxPerCall" validate:"max=20"`
	MaxUnitsPerCall *int64        `json:"maxUnitsPerCall"`
}

// putAccountLimits is PUT /v1/accounts/{agentId}/limits (admin): 200 with
// the account (created if absent), 400 naming the field.
func (s *Server) putAccountLimits(c echo.Context) error {
	agent, err := agentParam(c)
	if err != nil {
		return err
	}
	var b accountLimitsBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	a, err := s.store.SetAccountLimits(storeCtx(c), agent, entitlement.AccountLimits{MaxPerCall: b.MaxPerCall, MaxUnitsPerCall: b.MaxUnitsPerCall})
	if store.CodeOf(err) == store.CodeInvalid {
		return fieldErrorOf(err)
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, a)
}
