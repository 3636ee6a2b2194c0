// Package fence carries a request's claim on its idempotency reservation
// from the ledger's middleware to the store, where the change the request
// makes checks, in its own atomic step, that the claim still holds. The
// store package gives these their public names (store.Fence,
// store.WithFence, store.FenceOf, store.ErrFenced); the idempotency ledgers
// use this package so they need not import the store.
package fence

import (
	"context"
	"errors"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// Fence is a request's claim on one reservation of a ledger row. Each
// ledger backend makes its own; a store checks the fences of the ledgers
// that live in its own database (their extra methods say how), and refuses
// any other.
type Fence interface {
	// Claim names the claim, for logs and errors: the row's sanitized
	// reference and the reservation's attempt. The fences of one
	// reservation have one Claim; two reservations never share one.
	Claim() string
}

// ErrLost is wrapped by the error of a fenced change whose reservation no
// longer holds (released, reconciled, or taken by a later request): the
// change was not made.
var ErrLost = errors.New("the idempotency reservation of this request no longer holds")

// Lost returns the error of a fenced change refused because the
// reservation f claims no longer holds (why says how): Unavailable, since
// nothing changed and a retry with the same key runs the request anew.
func Lost(f Fence, why string) error {
	return fault.Wrap(fault.CodeUnavailable, ErrLost, "%s: %s", f.Claim(), why)
}

type key struct{}

// With returns ctx carrying f.
func With(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, key{}, f)
}

// Of returns the fence ctx carries, or nil.
func Of(ctx context.Context) Fence {
	f, _ := ctx.Value(key{}).(Fence)
	return f
}
