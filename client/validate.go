package client

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
)

// A request the server would refuse by the rules of Stipend's domain
// packages is refused here, before anything is sent, with the *Problem the
// server answers for it: a 400 naming the field (IsInvalid). The client
// checks consume, check and authorize requests with the same function the
// server runs (entitlement's Normalize), every amount with money.Validate
// (an amount that fails it could not even be encoded), agent IDs, and that
// a route which requires an Idempotency-Key gets one. Rules only the server
// knows (a positive payment amount, a grant's fields, a webhook URL) are
// the server's to answer. A refusal made here has no RequestID: no request
// was sent.

// checker is a request body that checks itself as the server will; its
// errors are *field.Error values naming the JSON field.
type checker interface{ check() error }

// invalid is the 400 invalid-request the server answers for err, a
// *field.Error naming the refused field (or any error, for the body as a
// whole).
func invalid(err error) *Problem {
	name, detail := "", err.Error()
	var fe *field.Error
	if errors.As(err, &fe) {
		name, detail = fe.Field, fe.Reason
	}
	summary := detail
	if name != "" {
		summary = name + ": " + detail
	}
	return &Problem{
		Type: problem.InvalidRequest.URI(), Title: problem.InvalidRequest.Title(), Status: http.StatusBadRequest,
		Detail: "the request is invalid: " + summary,
		Errors: []problem.FieldError{{Field: name, Detail: detail}},
	}
}

// keyMissing is the 400 the server answers a route that requires an
// Idempotency-Key when the request has none.
func keyMissing() *Problem {
	return &Problem{
		Type: problem.IdempotencyKeyMissing.URI(), Title: problem.IdempotencyKeyMissing.Title(), Status: http.StatusBadRequest,
		Detail: "this route requires an Idempotency-Key header",
		Errors: []problem.FieldError{{Field: "Idempotency-Key", Detail: "is required"}},
	}
}

// checkAmount checks the amount at path: required (a zero Money is none),
// and valid.
func checkAmount(path string, m money.Money) error {
	if m.IsZero() {
		return &field.Error{Field: path, Reason: "is required"}
	}
	return field.Within(path, m.Validate())
}

// checkOptionalAmount checks the amount at path, if there is one.
func checkOptionalAmount(path string, m *money.Money) error {
	if m == nil {
		return nil
	}
	return field.Within(path, m.Validate())
}

// checkAgent checks an agent ID at path.
func checkAgent(path, id string) error {
	if !entitlement.ValidName(id) {
		return &field.Error{Field: path, Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", entitlement.MaxNameLen)}
	}
	return nil
}

func (r ConsumeRequest) check() error {
	req := entitlement.ConsumeRequest{AgentID: r.AgentID, Service: r.Service, Tool: r.Tool,
		IdempotencyKey: r.IdempotencyKey, Cost: r.Cost, Units: r.Units, EntitlementID: r.EntitlementID}
	return req.Normalize()
}

func (r AuthorizeRequest) check() error {
	// Bounded first, as the server does, so the conversion cannot overflow.
	if maxTTL := int64(entitlement.MaxHoldTTL / time.Second); r.TTLSeconds < 0 || r.TTLSeconds > maxTTL {
		return &field.Error{Field: "ttlSeconds", Reason: fmt.Sprintf("must be between 1 and %d", maxTTL)}
	}
	req := entitlement.HoldRequest{
		ConsumeRequest: entitlement.ConsumeRequest{AgentID: r.AgentID, Service: r.Service, Tool: r.Tool,
			IdempotencyKey: r.IdempotencyKey, Cost: r.MaxCost, Units: r.MaxUnits, EntitlementID: r.EntitlementID},
		TTL: time.Duration(r.TTLSeconds) * time.Second,
	}
	return req.Normalize()
}

func (r CaptureRequest) check() error {
	if err := checkAgent("agentId", r.AgentID); err != nil {
		return err
	}
	return checkOptionalAmount("cost", r.Cost)
}

func (r releaseRequest) check() error { return checkAgent("agentId", r.AgentID) }

func (r RefundRequest) check() error { return checkOptionalAmount("cost", r.Cost) }

func (r PaymentRequest) check() error {
	if err := checkAgent("agentId", r.AgentID); err != nil {
		return err
	}
	return checkAmount("amount", r.Amount)
}

func (g EntitlementGrant) check() error { return checkOptionalAmount("balance", g.Balance) }
