package api

import (
	"errors"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func (s *Server) registerRefunds(g group) {
	g.POST("/consumptions/:id/refund", s.refundConsumption, s.auth(apikey.RoleBilling))
}

// refundBody is the optional body of POST /v1/consumptions/{id}/refund:
// what to give back. An omitted field (or no body) gives back all that was
// charged.
type refundBody struct {
	Cost  *money.Money `json:"cost"`
	Units *int64       `json:"units" validate:"omitnil,min=1"`
}

// Validate checks the amount's money; the store checks it against the
// consumption.
func (b *refundBody) Validate() error { return validCost(b.Cost) }

// refundAnswer is the 200 body of a consumption refund.
type refundAnswer struct {
	Consumption entitlement.Consumption `json:"consumption"`
	Entitlement entitlement.Entitlement `json:"entitlement"`
}

// refundConsumption runs behind the idempotency ledger (LedgerRoutes): its
// one write is the store call, and it answers 4xx only when that call
// changed nothing.
func (s *Server) refundConsumption(c echo.Context) error {
	id, b, err := withBody[refundBody](c, idParam, s.decodeOptional)
	if err != nil {
		return err
	}
	res, err := s.store.RefundConsumption(storeCtx(c), id, entitlement.Amount{Cost: b.Cost, Units: b.Units})
	switch {
	case errors.Is(err, store.ErrNotFound):
		return NotFound("consumption not found")
	case errors.Is(err, store.ErrConflict):
		// Refused by the entitlement's state (entitlement.ErrRefundRefused),
		// or already refunded with another amount.
		return &Error{Status: http.StatusConflict, Kind: problem.RefundRefused,
			Detail: "cannot refund this consumption: " + messageOf(err)}
	case errors.Is(err, store.ErrInvalid):
		return fieldErrorOf(err)
	case err != nil:
		return err
	}
	return c.JSON(http.StatusOK, refundAnswer{Consumption: res.Consumption, Entitlement: res.Entitlement})
}
