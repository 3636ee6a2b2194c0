package idempotency

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v4"
)

// ProblemTypeBase prefixes the problem type URIs the middleware answers with
// (the same base the REST API uses).
const ProblemTypeBase = "https://stipend-mcp.github.io/stipend/problems/"

// The problem types of the middleware; the URI is ProblemTypeBase + the value.
const (
	ProblemKeyMissing    = "idempotency-key-missing"     // 400
	ProblemKeyInvalid    = "idempotency-key-invalid"     // 400
	ProblemBodyTooLarge  = "body-too-large"              // 413
	ProblemInProgress    = "idempotency-key-in-progress" // 409
	ProblemKeyReused     = "idempotency-key-reused"      // 422
	ProblemNotDurable    = "idempotency-ledger-not-durable"
	ProblemUnavailable   = "unavailable" // 503
	ProblemInternalError = "internal"    // 500
)

// HeaderKey is the request header carrying the idempotency key.
const HeaderKey = "Idempotency-Key"

// HeaderReplayed marks a replayed response.
const HeaderReplayed = "Idempotent-Replayed"

// Problem is the RFC 9457 document the middleware writes. Reference,
// OperationID and TraceID are set on 409: the sanitized ledger reference and
// the correlation ids of the attempt that holds the key, never the raw key.
type Problem struct {
	Type        string `json:"type"`
	Title       string `json:"title"`
	Status      int    `json:"status"`
	Detail      string `json:"detail,omitempty"`
	Reference   string `json:"reference,omitempty"`
	OperationID string `json:"operationId,omitempty"`
	TraceID     string `json:"traceId,omitempty"`
}

func newProblem(status int, kind, title, detail string) Problem {
	return Problem{Type: ProblemTypeBase + kind, Title: title, Status: status, Detail: detail}
}

// writeProblem answers p as application/problem+json.
func writeProblem(c echo.Context, p Problem) error {
	b, err := json.Marshal(p)
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "application/problem+json")
	if c.Request().Method == http.MethodHead {
		return c.NoContent(p.Status)
	}
	return c.Blob(p.Status, "application/problem+json", b)
}
