package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// A hold is a two-step charge (entitlement/hold.go): authorize reserves the
// most a call may cost, then capture charges what it did cost, or release
// gives it all back; a hold nobody ends expires. Capture and release are
// idempotent by their own contract (repeating one answers a replay), so
// none of these routes goes through the idempotency ledger.

func (s *Server) registerHolds(g group) {
	host := s.auth(apikey.RoleHost)
	g.POST("/authorize", s.authorize, host)
	g.GET("/holds/:id", s.getHold, s.auth(apikey.RoleHost, apikey.RoleBilling))
	g.POST("/holds/:id/capture", s.captureHold, host)
	g.POST("/holds/:id/release", s.releaseHold, host)
}

// authorizeBody is the body of POST /v1/authorize.
type authorizeBody struct {
	AgentID        string       `json:"agentId" validate:"required,name"`
	Service        string       `json:"service" validate:"required,name"`
	Tool           string       `json:"tool" validate:"required,name"`
	IdempotencyKey string       `json:"idempotencyKey" validate:"required,idempotencykey"`
	MaxCost        *money.Money `json:"maxCost"`
	MaxUnits       *int64       `json:"maxUnits" validate:"omitnil,units"`
	EntitlementID  string       `json:"entitlementId" validate:"omitempty,name"`
	TTLSeconds     int64        `json:"ttlSeconds" validate:"holdttl"`
}

func (b *authorizeBody) request() entitlement.HoldRequest {
	return entitlement.HoldRequest{
		ConsumeRequest: entitlement.ConsumeRequest{
			AgentID: b.AgentID, Service: b.Service, Tool: b.Tool, IdempotencyKey: b.IdempotencyKey,
			Cost: b.MaxCost, Units: orZero(b.MaxUnits), EntitlementID: b.EntitlementID,
		},
		TTL: time.Duration(b.TTLSeconds) * time.Second, // the holdttl tag bounds it first
	}
}

// holdAnswer is the 200 body of authorize, capture and release.
type holdAnswer struct {
	Result      store.Outcome            `json:"result"`
	Hold        entitlement.Hold         `json:"hold"`
	Consumption *entitlement.Consumption `json:"consumption,omitempty"`
}

func (s *Server) authorize(c echo.Context) error {
	var b authorizeBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	req := b.request()
	if err := req.Normalize(); err != nil {
		return fieldErrorOf(err)
	}
	res, err := s.store.Authorize(storeCtx(c), req)
	if err != nil {
		return chargeError(err)
	}
	if res.Outcome == store.Held {
		s.charged(&res.Entitlement) // a hold lowers what is available too
	}
	if err := s.chargeRefused("authorize", res.Outcome, res.Denials,
		"this idempotency key was already used for a call with different parameters, or for a consume; nothing was reserved"); err != nil {
		return err
	}
	switch res.Outcome {
	case store.Held, store.Replay:
		return c.JSON(http.StatusOK, holdAnswer{Result: res.Outcome, Hold: res.Hold})
	}
	return unknownOutcome("authorize", res.Outcome)
}

func (s *Server) getHold(c echo.Context) error {
	return getOwned(c, "hold", s.store.GetHold, func(h *entitlement.Hold) string { return h.AgentID })
}

// captureBody is the body of POST /v1/holds/{id}/capture: what the call
// cost. An omitted field charges the hold's maximum.
type captureBody struct {
	AgentID string       `json:"agentId" validate:"required,name"`
	Cost    *money.Money `json:"cost"`
	Units   *int64       `json:"units" validate:"omitnil,min=0"`
}

// Validate checks the amount's money; the store checks it against the hold.
func (b *captureBody) Validate() error { return validCost(b.Cost) }

// validCost checks an optional "cost" member.
func validCost(m *money.Money) error {
	if m == nil {
		return nil
	}
	return field.Within("cost", m.Validate())
}

func (s *Server) captureHold(c echo.Context) error {
	id, b, err := withBody[captureBody](c, idParam, s.decode)
	if err != nil {
		return err
	}
	res, err := s.store.CaptureHold(storeCtx(c), id, b.AgentID, entitlement.Amount{Cost: b.Cost, Units: b.Units})
	if err != nil {
		return holdError(err, "capture")
	}
	if res.Outcome == store.Captured {
		s.charged(&res.Entitlement)
	}
	switch res.Outcome {
	case store.Captured, store.Replay:
		return c.JSON(http.StatusOK, holdAnswer{Result: res.Outcome, Hold: res.Hold, Consumption: &res.Consumption})
	}
	return unknownOutcome("capture", res.Outcome)
}

// releaseBody is the body of POST /v1/holds/{id}/release.
type releaseBody struct {
	AgentID string `json:"agentId" validate:"required,name"`
}

func (s *Server) releaseHold(c echo.Context) error {
	id, b, err := withBody[releaseBody](c, idParam, s.decode)
	if err != nil {
		return err
	}
	res, err := s.store.ReleaseHold(storeCtx(c), id, b.AgentID)
	if err != nil {
		return holdError(err, "release")
	}
	switch res.Outcome {
	case store.Released, store.Replay:
		return c.JSON(http.StatusOK, holdAnswer{Result: res.Outcome, Hold: res.Hold})
	}
	return unknownOutcome("release", res.Outcome)
}

// holdError explains a store error of capture or release: one 404 for an
// unknown hold and another agent's alike, 409 hold-expired or hold-conflict
// for a hold that cannot end this way, and 400 naming the field of an
// amount the hold does not cover.
func holdError(err error, verb string) error {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return NotFound("hold not found")
	case errors.Is(err, entitlement.ErrHoldExpired):
		return &Error{Status: http.StatusConflict, Kind: problem.HoldExpired,
			Detail: "the hold has expired: what it reserved was released, nothing was charged"}
	case errors.Is(err, store.ErrConflict):
		return &Error{Status: http.StatusConflict, Kind: problem.HoldConflict,
			Detail: "cannot " + verb + " this hold: " + messageOf(err)}
	case errors.Is(err, store.ErrInvalid):
		return fieldErrorOf(err)
	}
	return err
}

// unknownOutcome is the 500 of a store answer a route does not expect.
func unknownOutcome(route string, o store.Outcome) error {
	return &Error{Status: http.StatusInternalServerError, Kind: problem.Internal, Detail: "internal error",
		Err: store.Errorf(store.CodeInternal, "unknown %s outcome %q", route, o)}
}
