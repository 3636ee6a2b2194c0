package api

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func (s *Server) registerConsume(g group) {
	host := s.auth(apikey.RoleHost)
	g.POST("/consume", s.consume, host)
	g.POST("/check", s.checkConsume, host)
}

// consumeBody is the body of POST /v1/consume and /v1/check.
type consumeBody struct {
	AgentID        string       `json:"agentId" validate:"required,name"`
	Service        string       `json:"service" validate:"required,name"`
	Tool           string       `json:"tool" validate:"required,name"`
	IdempotencyKey string       `json:"idempotencyKey" validate:"required,idempotencykey"`
	Cost           *money.Money `json:"cost"`
	Units          *int64       `json:"units" validate:"omitnil,units"`
	EntitlementID  string       `json:"entitlementId" validate:"omitempty,name"`
}

func (b *consumeBody) request() entitlement.ConsumeRequest {
	return entitlement.ConsumeRequest{
		AgentID: b.AgentID, Service: b.Service, Tool: b.Tool, IdempotencyKey: b.IdempotencyKey,
		Cost: b.Cost, Units: orZero(b.Units), EntitlementID: b.EntitlementID,
	}
}

// consumeAnswer is the 200 body of consume and check.
type consumeAnswer struct {
	Result      store.Outcome            `json:"result"`
	Consumption *entitlement.Consumption `json:"consumption,omitempty"`
	Entitlement *entitlement.Entitlement `json:"entitlement,omitempty"`
}

func (s *Server) consume(c echo.Context) error {
	return s.consumeWith(c, "consume", s.store.CheckAndConsume)
}

func (s *Server) checkConsume(c echo.Context) error {
	return s.consumeWith(c, "check", s.store.Check)
}

// consumeWith decodes and validates a consume body, runs op (the charge or
// the dry run) and answers.
func (s *Server) consumeWith(c echo.Context, route string, op func(context.Context, entitlement.ConsumeRequest) (store.ConsumeResult, error)) error {
	var b consumeBody
	if err := s.decode(c, &b); err != nil {
		return err
	}
	req := b.request()
	if err := req.Normalize(); err != nil {
		return fieldErrorOf(err)
	}
	res, err := op(storeCtx(c), req)
	if err != nil {
		return chargeError(err)
	}
	if res.Outcome == store.Consumed {
		s.charged(&res.Entitlement)
	}
	return s.answerConsume(c, route, res)
}

// chargeError is the answer of a charge the store refused outright: its
// Invalid names the field (agentId, when the caller is a wallet).
func chargeError(err error) error {
	if store.CodeOf(err) == store.CodeInvalid {
		return fieldErrorOf(err)
	}
	return err
}

// answerConsume maps a consume or check result to its HTTP answer: 200
// consumed, replay or allowed; 402 denied, with every reason; 422 conflict.
func (s *Server) answerConsume(c echo.Context, route string, res store.ConsumeResult) error {
	if err := s.chargeRefused(route, res.Outcome, res.Denials,
		"this idempotency key was already used for a call with different parameters; nothing was charged"); err != nil {
		return err
	}
	switch res.Outcome {
	case store.Consumed, store.Replay:
		if !handEncodes(&res.Consumption) {
			return answerJSON(c, res.Outcome, &res.Consumption, nil)
		}
		bp := answerPool.Get().(*[]byte)
		b := appendConsumeAnswer((*bp)[:0], res.Outcome, &res.Consumption)
		err := c.JSONBlob(http.StatusOK, b)
		*bp = b
		answerPool.Put(bp)
		return err
	case store.Allowed:
		return answerJSON(c, res.Outcome, nil, &res.Entitlement)
	}
	return unknownOutcome("consume", res.Outcome)
}

// answerJSON answers 200 with the consumeAnswer of result and copies of
// cons and e (each may be nil), encoded by encoding/json. The copies keep
// the result a handler holds on its stack on the common path, which does
// not come here.
func answerJSON(c echo.Context, result store.Outcome, cons *entitlement.Consumption, e *entitlement.Entitlement) error {
	a := consumeAnswer{Result: result}
	if cons != nil {
		cp := *cons
		a.Consumption = &cp
	}
	if e != nil {
		cp := *e
		a.Entitlement = &cp
	}
	return c.JSON(http.StatusOK, a)
}

// chargeRefused counts the outcome of a consume, check or authorize on
// route and answers its refusals: 422 for a conflict (conflictDetail), 402
// for a denial, with every reason. It returns nil for any other outcome.
func (s *Server) chargeRefused(route string, outcome store.Outcome, denials []entitlement.Denial, conflictDetail string) error {
	reason := ""
	if outcome == store.Denied {
		reason = string(mainReason(denials))
	}
	s.metrics.countResult(route, string(outcome), reason)
	switch outcome {
	case store.Conflict:
		return &Error{Status: http.StatusUnprocessableEntity, Kind: problem.IdempotencyKeyReused, Detail: conflictDetail}
	case store.Denied:
		return &Error{Status: http.StatusPaymentRequired, Kind: problem.PaymentRequired,
			Detail: "no entitlement of the agent covers this call (" + reason + ")", Reasons: denials}
	}
	return nil
}

// reasonRank orders denial reasons by how much they tell the caller: the
// reason of the entitlement that came closest to paying comes first.
var reasonRank = map[entitlement.Reason]int{
	entitlement.ReasonInsufficientBalance: 0,
	entitlement.ReasonQuotaExhausted:      1,
	entitlement.ReasonSpendLimit:          2,
	entitlement.ReasonMemberLimit:         2, // a spend limit too: the member's in the wallet
	entitlement.ReasonMaxPerCall:          3,
	entitlement.ReasonTooManyHolds:        4,
	entitlement.ReasonExpired:             5,
	entitlement.ReasonCurrencyMismatch:    6,
	entitlement.ReasonCostRequired:        7,
	entitlement.ReasonRevoked:             8,
	entitlement.ReasonScopeMismatch:       9,
	entitlement.ReasonNotFound:            10,
}

// mainReason picks the one reason that sums up a denial, for the metric
// label and the detail.
func mainReason(ds []entitlement.Denial) entitlement.Reason {
	best := entitlement.ReasonNotFound
	for _, d := range ds {
		r, ok := reasonRank[d.Reason]
		if !ok {
			return d.Reason
		}
		if r < reasonRank[best] {
			best = d.Reason
		}
	}
	return best
}

// orZero is *n, or 0 for an omitted member: the domain's default (one unit).
func orZero(n *int64) int64 {
	if n == nil {
		return 0
	}
	return *n
}
