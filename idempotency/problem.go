package idempotency

import (
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/problem"
)

// HeaderKey is the request header carrying the idempotency key.
const HeaderKey = "Idempotency-Key"

// HeaderReplayed marks a replayed response.
const HeaderReplayed = "Idempotent-Replayed"

// writeProblem answers p, carrying the request ID the response already has
// (X-Request-Id, set by the server's request-ID middleware before this
// one), as every problem of the API does.
func writeProblem(c echo.Context, p problem.Problem) error {
	p.RequestID = c.Response().Header().Get(echo.HeaderXRequestID)
	return problem.Write(c.Response(), c.Request(), p)
}
