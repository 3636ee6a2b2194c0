package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// ProblemTypeBase prefixes every problem type URI. The URIs are stable:
// clients may switch on them.
const ProblemTypeBase = "https://stipend-mcp.github.io/stipend/problems/"

// Kind names one problem type; its URI is ProblemTypeBase + Kind.
type Kind string

// The problem kinds, with the status each is served with.
const (
	KindInvalidRequest       Kind = "invalid-request"        // 400
	KindUnauthorized         Kind = "unauthorized"           // 401
	KindPaymentRequired      Kind = "payment-required"       // 402
	KindForbidden            Kind = "forbidden"              // 403
	KindNotFound             Kind = "not-found"              // 404
	KindMethodNotAllowed     Kind = "method-not-allowed"     // 405
	KindConflict             Kind = "conflict"               // 409
	KindBodyTooLarge         Kind = "body-too-large"         // 413
	KindUnsupportedMediaType Kind = "unsupported-media-type" // 415
	KindIdempotencyConflict  Kind = "idempotency-key-reused" // 422
	KindInternal             Kind = "internal"               // 500
	KindUnavailable          Kind = "unavailable"            // 503
)

var kindTitles = map[Kind]string{
	KindInvalidRequest:       "Invalid request",
	KindUnauthorized:         "Unauthorized",
	KindPaymentRequired:      "Payment required",
	KindForbidden:            "Forbidden",
	KindNotFound:             "Not found",
	KindMethodNotAllowed:     "Method not allowed",
	KindConflict:             "Conflict",
	KindBodyTooLarge:         "Request body too large",
	KindUnsupportedMediaType: "Unsupported media type",
	KindIdempotencyConflict:  "Idempotency key reused with different parameters",
	KindInternal:             "Internal error",
	KindUnavailable:          "Service unavailable",
}

// storeStatus is the one table from store error codes to HTTP answers.
var storeStatus = map[store.Code]struct {
	status int
	kind   Kind
}{
	store.CodeNotFound:    {http.StatusNotFound, KindNotFound},
	store.CodeConflict:    {http.StatusConflict, KindConflict},
	store.CodeInvalid:     {http.StatusBadRequest, KindInvalidRequest},
	store.CodeUnavailable: {http.StatusServiceUnavailable, KindUnavailable},
	store.CodeInternal:    {http.StatusInternalServerError, KindInternal},
}

// FieldError names one invalid field of a request. Field is a dotted JSON
// path ("cost.cents"), a query parameter or a header name; "" is the body as
// a whole.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// Problem is an RFC 9457 problem document.
type Problem struct {
	Type      string               `json:"type"`
	Title     string               `json:"title"`
	Status    int                  `json:"status"`
	Detail    string               `json:"detail,omitempty"`
	RequestID string               `json:"requestId,omitempty"`
	Errors    []FieldError         `json:"errors,omitempty"`
	Reasons   []entitlement.Denial `json:"reasons,omitempty"`
}

// Error is an error a handler returns to answer with a problem. Err, if
// set, is logged and never shown.
type Error struct {
	Status  int
	Kind    Kind
	Detail  string
	Errors  []FieldError
	Reasons []entitlement.Denial
	Err     error
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
		Status: http.StatusBadRequest, Kind: KindInvalidRequest,
		Detail: "the request is invalid: " + joinField(field, detail),
		Errors: []FieldError{{Field: field, Detail: detail}},
	}
}

// NotFound answers 404.
func NotFound(detail string) *Error {
	return &Error{Status: http.StatusNotFound, Kind: KindNotFound, Detail: detail}
}

func joinField(field, detail string) string {
	if field == "" {
		return detail
	}
	return field + ": " + detail
}

// problemOf turns any error a handler returned into the problem to answer
// with, and reports whether it is an internal error to log with its detail.
func problemOf(err error) (Problem, bool) {
	var ae *Error
	if errors.As(err, &ae) {
		return Problem{Status: ae.Status, Type: typeURI(ae.Kind), Title: kindTitles[ae.Kind],
			Detail: ae.Detail, Errors: ae.Errors, Reasons: ae.Reasons}, ae.Status >= 500 && ae.Err != nil
	}
	var se *store.Error
	if errors.As(err, &se) {
		m, ok := storeStatus[se.Code]
		if !ok {
			m = storeStatus[store.CodeInternal]
		}
		p := Problem{Status: m.status, Type: typeURI(m.kind), Title: kindTitles[m.kind]}
		switch se.Code {
		case store.CodeInternal:
			p.Detail = "internal error"
			return p, true
		case store.CodeUnavailable:
			p.Detail = "the store is unavailable; retrying with the same idempotency key is safe"
			return p, true
		default:
			p.Detail = se.Message
		}
		return p, false
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		switch he.Code {
		case http.StatusNotFound:
			return Problem{Status: 404, Type: typeURI(KindNotFound), Title: kindTitles[KindNotFound], Detail: "no such route"}, false
		case http.StatusMethodNotAllowed:
			return Problem{Status: 405, Type: typeURI(KindMethodNotAllowed), Title: kindTitles[KindMethodNotAllowed], Detail: "method not allowed on this route"}, false
		case http.StatusRequestEntityTooLarge:
			return Problem{Status: 413, Type: typeURI(KindBodyTooLarge), Title: kindTitles[KindBodyTooLarge], Detail: "request body too large",
				Errors: []FieldError{{Field: "", Detail: "request body too large"}}}, false
		case http.StatusUnauthorized:
			return Problem{Status: 401, Type: typeURI(KindUnauthorized), Title: kindTitles[KindUnauthorized], Detail: "missing or invalid API key"}, false
		case http.StatusForbidden:
			return Problem{Status: 403, Type: typeURI(KindForbidden), Title: kindTitles[KindForbidden], Detail: "forbidden"}, false
		}
		if he.Code >= 400 && he.Code < 500 {
			return Problem{Status: he.Code, Type: typeURI(KindInvalidRequest), Title: http.StatusText(he.Code), Detail: fmt.Sprint(he.Message)}, false
		}
	}
	return Problem{Status: 500, Type: typeURI(KindInternal), Title: kindTitles[KindInternal], Detail: "internal error"}, true
}

func typeURI(k Kind) string { return ProblemTypeBase + string(k) }

// writeProblem sends p as application/problem+json.
func writeProblem(c echo.Context, p Problem) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if p.Status == http.StatusUnauthorized {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="stipend"`)
	}
	return c.Blob(p.Status, "application/problem+json", b)
}
