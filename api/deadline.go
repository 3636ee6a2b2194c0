package api

import (
	"context"
	"time"

	"github.com/labstack/echo/v4"
)

// DefaultStoreTimeout bounds a request's store calls when
// Config.StoreTimeout is 0. Healthy Firestore calls take milliseconds to a
// few hundred (a contended transaction); two seconds is ample for them and
// short enough that a stalled store answers 503 while the caller can still
// retry: the MCP gate gives each charge 5 s, retries included, which then
// holds two attempts and their backoff.
const DefaultStoreTimeout = 2 * time.Second

// storeDeadline bounds every store call a request makes: its context
// (storeCtx, and the idempotency ledger's, which derive from it) ends
// s.timeout after the request arrived. A store that does not answer
// in time fails the call as unavailable (503), with nothing applied unless
// a commit was in flight (an uncertain failure: a retry with the same
// idempotency key tells). The client's hang-up still ends the context
// earlier; routes behind the ledger keep the deadline but not the hang-up.
func (s *Server) storeDeadline(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ctx, cancel := context.WithTimeout(req.Context(), s.timeout)
		defer cancel()
		c.SetRequest(req.WithContext(ctx))
		return next(c)
	}
}
