package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// markable is what the memory store needs of a fence (see store.Fence):
// idempotency/memledger's fences have it. The two live in one process,
// each behind its own lock, so the store calls Mark under its own lock,
// after every check of a change and before applying it (the apply cannot
// fail): the ledger sees the row marked exactly when the change is made.
type markable interface {
	store.Fence
	// Mark checks that the reservation still holds and marks its row
	// written, atomically under the ledger's lock; an error (wrapping
	// store.ErrFenced) means the change must not be made.
	Mark() error
}

// markFence marks the fence ctx carries, if any, for a change about to be
// applied. Callers hold s.mu and apply the change only on a nil answer. A
// fence of another kind fails the change: the memory store cannot check it.
func markFence(ctx context.Context) error {
	m, ok, err := unit.FenceOf[markable](ctx, "memory")
	if !ok {
		return err
	}
	return m.Mark()
}
