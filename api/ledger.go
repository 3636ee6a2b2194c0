package api

import (
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/idempotency"
)

// LedgerRoutes are the routes that require an Idempotency-Key and go
// through the idempotency ledger: the writes that are not idempotent by their
// own contract (docs/idempotency.md says why the others are not here). Each
// is "METHOD path template", as echo routes it.
//
// Each of their handlers makes exactly one store call that writes, and
// answers 4xx only before it. A failed request whose error is a store error
// that is not Uncertain therefore changed nothing, and its key is released
// (changedNothing); a handler that wrote and then failed on something else
// must not return that write's store error. That call is one of the store
// methods that honour a fence (store.Fence) and is made with the request's
// context (storeCtx), so on a fenced ledger (idempotency.Options.Fenced) a
// key whose write never committed heals itself.
var LedgerRoutes = []string{
	"POST /v1/accounts/:agentId/entitlements",
	"POST /v1/payments/:id/refund",
	"POST /v1/consumptions/:id/refund",
	"POST /v1/webhook-endpoints",
	"POST /v1/webhook-endpoints/:id/rotate-secret",
	"POST /v1/deliveries/:id/retry",
	"POST /v1/portal-sessions",
	"POST /v1/wallets/:walletId/members",
}

// UseLedger puts ledger in front of LedgerRoutes and adds its probe to
// /readyz. Call it once, after New and before the server handles a request.
//
// The ledger middleware joins Config.RouteMiddleware (after any the config
// gave), so it runs after authentication and the role check: a request
// without a valid key, or with a key of the wrong role, is refused (401, 403)
// without touching the ledger. Unset fields of opts get the server's
// Logger, its request body limit, and PrincipalOf (the API key's ID) as the
// verified caller in the request fingerprint; opts.Development is the
// caller's to set.
func (s *Server) UseLedger(ledger idempotency.Ledger, opts idempotency.Options) {
	if opts.Logger == nil {
		opts.Logger = s.log
	}
	if opts.MaxBodyBytes == 0 {
		opts.MaxBodyBytes = s.bodyLimit
	}
	if opts.Principal == nil {
		opts.Principal = PrincipalOf
	}
	requires := make(map[string]bool, len(LedgerRoutes))
	for _, r := range LedgerRoutes {
		requires[r] = true
	}
	guard := idempotency.Middleware(ledger, opts)
	prev := s.routeMW
	s.routeMW = func(method, path string) []echo.MiddlewareFunc {
		var mws []echo.MiddlewareFunc
		if prev != nil {
			mws = prev(method, path)
		}
		if requires[method+" "+path] {
			mws = append(mws, guard)
		}
		return mws
	}
	s.probes = append(s.probes, readyProbe{ledger.Probe, "the idempotency ledger did not answer the readiness probe"})
}
