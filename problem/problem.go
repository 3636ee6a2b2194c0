// Package problem is Stipend's RFC 9457 problem document: the one shape of
// every error answer, from the REST API (package api) and from the
// idempotency middleware alike, the type URIs clients switch on, and the
// field errors a refused request names. It imports only the standard library
// and the entitlement types, so clients can share it.
package problem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/stipend-mcp/stipend/entitlement"
)

// TypeBase prefixes every problem type URI. The URIs are stable: clients
// may switch on them.
const TypeBase = "https://stipend-mcp.github.io/stipend/problems/"

// ContentType is the media type of a problem document.
const ContentType = "application/problem+json"

// RetryAfterSeconds is the Retry-After header (in seconds) of the answers
// that a retry of the same request can change: a 503 when the store or the
// idempotency ledger did not answer, and a 409 while a request with the same
// Idempotency-Key is in progress.
const RetryAfterSeconds = "1"

// Kind names one problem type; its URI is TypeBase + Kind.
type Kind string

// The problem kinds, with the status each is served with. docs/api.md and
// docs/idempotency.md list when each is answered.
const (
	InvalidRequest       Kind = "invalid-request"        // 400
	Unauthorized         Kind = "unauthorized"           // 401
	PaymentRequired      Kind = "payment-required"       // 402
	Forbidden            Kind = "forbidden"              // 403
	NotFound             Kind = "not-found"              // 404
	MethodNotAllowed     Kind = "method-not-allowed"     // 405
	Conflict             Kind = "conflict"               // 409
	HoldConflict         Kind = "hold-conflict"          // 409
	HoldExpired          Kind = "hold-expired"           // 409
	RefundRefused        Kind = "refund-refused"         // 409
	BodyTooLarge         Kind = "body-too-large"         // 413
	UnsupportedMediaType Kind = "unsupported-media-type" // 415
	Internal             Kind = "internal"               // 500
	Unavailable          Kind = "unavailable"            // 503
	// ProviderError: the payment provider (Stripe) refused or did not
	// answer a call Stipend made for the request (ProviderRequestID names
	// Stripe's request). Nothing was left half-made.
	ProviderError Kind = "provider-error" // 502

	IdempotencyKeyMissing       Kind = "idempotency-key-missing"        // 400
	IdempotencyKeyInvalid       Kind = "idempotency-key-invalid"        // 400
	IdempotencyKeyInProgress    Kind = "idempotency-key-in-progress"    // 409
	IdempotencyKeyReused        Kind = "idempotency-key-reused"         // 422
	IdempotencyLedgerNotDurable Kind = "idempotency-ledger-not-durable" // 503
)

var titles = map[Kind]string{
	InvalidRequest:       "Invalid request",
	Unauthorized:         "Unauthorized",
	PaymentRequired:      "Payment required",
	Forbidden:            "Forbidden",
	NotFound:             "Not found",
	MethodNotAllowed:     "Method not allowed",
	Conflict:             "Conflict",
	HoldConflict:         "Hold already ended",
	HoldExpired:          "Hold expired",
	RefundRefused:        "Refund refused",
	BodyTooLarge:         "Request body too large",
	UnsupportedMediaType: "Unsupported media type",
	Internal:             "Internal error",
	Unavailable:          "Service unavailable",
	ProviderError:        "Payment provider error",

	IdempotencyKeyMissing:       "Idempotency-Key required",
	IdempotencyKeyInvalid:       "Invalid Idempotency-Key",
	IdempotencyKeyInProgress:    "Request in progress",
	IdempotencyKeyReused:        "Idempotency key reused with different parameters",
	IdempotencyLedgerNotDurable: "Idempotency ledger not durable",
}

// URI returns the problem type URI of k.
func (k Kind) URI() string { return TypeBase + string(k) }

// Title returns the short, fixed summary of k.
func (k Kind) Title() string { return titles[k] }

// Problem is an RFC 9457 problem document, as the OpenAPI document's
// Problem schema describes it.
type Problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// RequestID is the request's X-Request-Id, to find it in the logs.
	RequestID string `json:"requestId,omitempty"`
	// Errors names the request fields that were refused.
	Errors []FieldError `json:"errors,omitempty"`
	// Reasons says, for a 402, why each entitlement could not pay.
	Reasons []entitlement.Denial `json:"reasons,omitempty"`
	// Reference, OperationID and TraceID are set on an
	// idempotency-key-in-progress 409: the sanitized ledger reference and
	// the correlation ids of the attempt that holds the key, never the raw
	// key.
	Reference   string `json:"reference,omitempty"`
	OperationID string `json:"operationId,omitempty"`
	TraceID     string `json:"traceId,omitempty"`
	// ProviderRequestID is, on a provider-error 502 or a 400 the provider
	// refused, the provider's ID of the request (Stripe's Request-Id), to
	// look it up in the provider's dashboard.
	ProviderRequestID string `json:"providerRequestId,omitempty"`
}

// FieldError names one refused field of a request. Field is a dotted JSON
// path ("cost.cents"), a query parameter or a header name; "" is the body as
// a whole.
type FieldError struct {
	Field  string `json:"field"`
	Detail string `json:"detail"`
}

// New returns the problem of kind k, answered with status.
func New(status int, k Kind, detail string) Problem {
	return Problem{Type: k.URI(), Title: k.Title(), Status: status, Detail: detail}
}

// TooLarge returns the 413 answer to a request body over limit bytes, the
// same from every route and layer that reads a body.
func TooLarge(limit int64) Problem {
	d := fmt.Sprintf("the body must be at most %d bytes", limit)
	p := New(http.StatusRequestEntityTooLarge, BodyTooLarge, d)
	p.Errors = []FieldError{{Field: "", Detail: d}}
	return p
}

// Write answers p on w as application/problem+json; the answer to a HEAD
// request r has the headers and no body.
func Write(w http.ResponseWriter, r *http.Request, p Problem) error {
	// Not HTML: "Bearer <key>" reads as written, not as \u003ckey\u003e.
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(p); err != nil {
		return err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(p.Status)
	if r.Method == http.MethodHead {
		return nil
	}
	_, err := w.Write(b)
	return err
}
