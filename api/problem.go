package api

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// storeStatus is the one table from store error codes to HTTP answers.
var storeStatus = map[store.Code]struct {
	status int
	kind   problem.Kind
}{
	store.CodeNotFound:    {http.StatusNotFound, problem.NotFound},
	store.CodeConflict:    {http.StatusConflict, problem.Conflict},
	store.CodeInvalid:     {http.StatusBadRequest, problem.InvalidRequest},
	store.CodeUnavailable: {http.StatusServiceUnavailable, problem.Unavailable},
	store.CodeInternal:    {http.StatusInternalServerError, problem.Internal},
}

// Error is an error a handler returns to answer with a problem. Err, if
// set, is logged and never shown.
type Error struct {
	Status  int
	Kind    problem.Kind
	Detail  string
	Errors  []problem.FieldError
	Reasons []entitlement.Denial
	// ProviderRequestID is the payment provider's request ID, shown.
	ProviderRequestID string
	Err               error
}

// Error describes the problem for logs.
func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Kind, e.Detail, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Kind, e.Detail)
}

// Unwrap returns the cause that is logged, not shown.
func (e *Error) Unwrap() error { return e.Err }

// Invalid answers 400 naming field.
func Invalid(field, detail string) *Error {
	return &Error{
		Status: http.StatusBadRequest, Kind: problem.InvalidRequest,
		Detail: "the request is invalid: " + joinField(field, detail),
		Errors: []problem.FieldError{{Field: field, Detail: detail}},
	}
}

// NotFound answers 404.
func NotFound(detail string) *Error {
	return &Error{Status: http.StatusNotFound, Kind: problem.NotFound, Detail: detail}
}

func joinField(field, detail string) string {
	if field == "" {
		return detail
	}
	return field + ": " + detail
}

// problemOf turns any error a handler returned into the problem to answer
// with, and reports whether it is an internal error to log with its detail.
func problemOf(err error) (problem.Problem, bool) {
	var ae *Error
	if errors.As(err, &ae) {
		p := problem.New(ae.Status, ae.Kind, ae.Detail)
		p.Errors, p.Reasons, p.ProviderRequestID = ae.Errors, ae.Reasons, ae.ProviderRequestID
		return p, ae.Status >= 500 && ae.Err != nil
	}
	var ke *idempotency.KeyError
	if errors.As(err, &ke) {
		return ke.Problem(), false
	}
	var se *store.Error
	if errors.As(err, &se) {
		m, ok := storeStatus[se.Code]
		if !ok {
			m = storeStatus[store.CodeInternal]
		}
		switch se.Code {
		case store.CodeInternal:
			return problem.New(m.status, m.kind, "internal error"), true
		case store.CodeUnavailable:
			if store.IsUncertain(err) {
				return problem.New(m.status, m.kind, "the store did not confirm the change in time, so it may have been applied; retry with the same idempotency key to find out (the retry answers the change, made once)"), true
			}
			return problem.New(m.status, m.kind, "the store is unavailable; retrying with the same idempotency key is safe"), true
		}
		return problem.New(m.status, m.kind, se.Message), false
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return problem.New(he.Code, problem.NotFound, "no such route"), false
		case http.StatusMethodNotAllowed:
			return problem.New(he.Code, problem.MethodNotAllowed, "method not allowed on this route"), false
		case http.StatusRequestEntityTooLarge:
			p := problem.New(he.Code, problem.BodyTooLarge, "request body too large")
			p.Errors = []problem.FieldError{{Field: "", Detail: "request body too large"}}
			return p, false
		case http.StatusUnauthorized:
			return problem.New(he.Code, problem.Unauthorized, "missing or invalid API key"), false
		case http.StatusForbidden:
			return problem.New(he.Code, problem.Forbidden, "forbidden"), false
		}
		if he.Code >= 400 && he.Code < 500 {
			p := problem.New(he.Code, problem.InvalidRequest, fmt.Sprint(he.Message))
			p.Title = http.StatusText(he.Code)
			return p, false
		}
	}
	return problem.New(http.StatusInternalServerError, problem.Internal, "internal error"), true
}

// writeProblem answers p, with the challenge a 401 must carry.
func writeProblem(c echo.Context, p problem.Problem) error {
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="stipend"`)
	}
	return problem.Write(c.Response(), c.Request(), p)
}

// messageOf is what a store error says, without its code: the message and
// its cause (a domain rule's refusal, such as entitlement.ErrRefundRefused's).
func messageOf(err error) string {
	var se *store.Error
	if !errors.As(err, &se) {
		return err.Error()
	}
	if se.Err != nil {
		return se.Message + ": " + se.Err.Error()
	}
	return se.Message
}
