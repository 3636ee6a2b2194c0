// Package ops holds the store methods off the hot path once for every
// backend: each loads what it needs through a unit of work (package unit),
// calls the pure rule of a domain package (payment, entitlement, topup;
// endpoint_rules.go and delivery_rules.go for webhooks) with the instant of
// the change, and writes what the rule returned. A backend's Store embeds Shared, bound to its unit of
// work, and so has these methods without writing them. Only the adapters
// under store/ import it; callers use the contract in package store.
package ops

import "github.com/stipend-mcp/stipend/store/internal/unit"

// Shared is the store methods every backend shares, bound to one
// backend's unit of work. Its methods are the store contract's (package
// store documents them).
type Shared struct {
	run unit.Run
}

// New returns the shared methods on the unit of work run.
func New(run unit.Run) Shared { return Shared{run: run} }
