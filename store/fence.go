package store

import (
	"context"

	"github.com/stipend-mcp/stipend/internal/fence"
)

// Fencing: how a store proves, together with the idempotency ledger, that
// a reserved request did not write and now never will.
//
// The routes behind the idempotency ledger (api.LedgerRoutes) each make
// one change through the store. A process can die between reserving the
// key and that change, or the change's answer can be lost; the ledger row
// then stays in progress. To release such a row without guessing, the
// ledger's middleware puts a Fence in the request's context (WithFence),
// and the store checks it in the same atomic step as the change:
//
//   - If the reservation no longer holds (its row was released, reclaimed
//     or reserved again by a later request), the change is not made and the
//     method fails with an Unavailable error wrapping ErrFenced.
//   - Otherwise the change also marks the row written, in that same step.
//
// A reclaim (idempotency.Ledger.Reclaim) then takes an in-progress row
// away only if it is unmarked, by compare-and-set: a change that committed
// first has marked the row and the reclaim refuses; a change that comes
// later finds its reservation gone and is refused. Age only decides when a
// reclaim is tried, never whether it is safe.
//
// The methods that must honour a fence are the ones those routes call:
// CreateEntitlement, RefundConsumption and RefundPayment of
// EntitlementStore, CreatePortalSession of PortalStore, and CreateEndpoint,
// RotateEndpointSecret and RetryDelivery of DeliveryStore
// (conformance.RunFenceTests checks them; a
// store may honour fences in more, such as the other endpoint and delivery
// updates). A call that changes nothing (a replay, a refusal, an error)
// neither checks nor marks the fence. Other methods may ignore fences, so
// a ledger route must make its change through one of those six. A store fails a call (Internal) whose context carries a fence it
// cannot check: a ledger row marked fenced must never be reclaimed on the
// word of a store that did not check it.
//
// A store checks the fences of the ledgers that live in its own database,
// in the transaction of the change:
//   - store/memory, idempotency/memledger's fences: under the store's lock,
//     after every check and before the change is applied (which then
//     cannot fail), it calls the fence's Mark, which checks and marks the
//     row under the ledger's lock.
//   - store/firestore, idempotency/fsledger's fences: the transaction reads
//     the row (tx.Get of the fence's document, which must be in the store's
//     database) with its other reads, and writes the mark with its other
//     writes; Firestore's serializable transactions order it against the
//     reclaim's conditional delete.
//   - store/postgres, idempotency/pgledger's fences (a ledger on the
//     store's own pool): the change's transaction runs the fence's Mark, an
//     UPDATE of the ledger row guarded by its token and state, which sets
//     written_at and locks the row until the transaction ends; the
//     reclaim's DELETE, guarded by the update time and written_at IS NULL,
//     waits for that lock and then finds the row changed.
//
// The fence type is the ledger's; each store type-asserts the method it
// needs, so no store imports a ledger. A new backend pair follows the same
// shape.

// Fence is a request's claim on its idempotency reservation. Ledger
// backends make them; see the fencing notes above.
type Fence = fence.Fence

// ErrFenced is wrapped (in an Unavailable error) by a fenced change whose
// reservation no longer holds; nothing changed.
var ErrFenced = fence.ErrLost

// WithFence returns ctx carrying f: the fenced methods called with it
// check f in the same atomic step as their change.
func WithFence(ctx context.Context, f Fence) context.Context { return fence.With(ctx, f) }

// FenceOf returns the fence ctx carries, or nil.
func FenceOf(ctx context.Context) Fence { return fence.Of(ctx) }
