package api

import (
	"time"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
)

// requestScope is what Stipend keeps of one request besides echo's
// context: its ID, the key that authenticated it, and the deadline of its
// store calls. It is the request's context from the first middleware on
// (the deadline's, deadlineCtx), so the three cost one allocation and no
// echo context map.
type requestScope struct {
	deadlineCtx
	id  string      // X-Request-Id
	key *apikey.Key // set by setKey (auth); nil before, and on routes without it
	own apikey.Key  // what key points to
}

// setKey records the key that authenticated the request.
func (r *requestScope) setKey(k apikey.Key) {
	r.own = k
	r.key = &r.own
}

// scopeKey finds the requestScope among the values of a context derived
// from it (the idempotency ledger's).
type scopeKey struct{}

// Value answers scopeKey with the scope itself, and every other key as
// the deadline context does.
func (r *requestScope) Value(key any) any {
	if key == (scopeKey{}) {
		return r
	}
	return r.deadlineCtx.Value(key)
}

// requestScope starts every request's scope:
//
//   - the request ID: the caller's X-Request-Id if it is 1–128 printable
//     ASCII characters, or a new one, echoed in the response;
//   - the store deadline, which bounds every store call the request makes:
//     its context (storeCtx, and the idempotency ledger's, which derive from
//     it) ends s.timeout after the request arrived. A store that does not
//     answer in time fails the call as unavailable (503), with nothing
//     applied unless a commit was in flight (an uncertain failure: a retry
//     with the same idempotency key tells). The client's hang-up still ends
//     the context earlier; routes behind the ledger keep the deadline but
//     not the hang-up.
func (s *Server) requestScope(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		id := req.Header.Get(HeaderRequestID)
		if !printableASCII(id, 128) {
			id = s.ids.next()
		}
		sc := &requestScope{id: id, deadlineCtx: deadlineCtx{Context: req.Context(), deadline: time.Now().Add(s.timeout)}}
		defer sc.release()
		c.SetRequest(req.WithContext(sc))
		c.Response().Header().Set(HeaderRequestID, id)
		return next(c)
	}
}

// scopeOf returns the request's scope; an empty one (no ID, no key) for a
// context that requestScope did not start.
func scopeOf(c echo.Context) *requestScope {
	ctx := c.Request().Context()
	if sc, ok := ctx.(*requestScope); ok {
		return sc
	}
	if sc, ok := ctx.Value(scopeKey{}).(*requestScope); ok {
		return sc
	}
	return &requestScope{}
}

func requestIDOf(c echo.Context) string { return scopeOf(c).id }
