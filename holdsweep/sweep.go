// Package holdsweep ends expired holds in the background. Every transaction
// that touches an entitlement ends its expired holds already; the sweep is
// for entitlements nobody touches, so their holds do not linger (and keep
// showing as held in a store's registry). Every instance may run one: the
// store ends each hold exactly once, whoever sweeps.
package holdsweep

import (
	"context"
	"log/slog"
	"time"

	"github.com/stipend-mcp/stipend/periodic"
)

// Expirer is the part of store.EntitlementStore a sweep uses.
type Expirer interface {
	ExpireHolds(ctx context.Context, limit int) (int, error)
}

// Batch is how many entitlements one ExpireHolds call takes on; a full
// batch is followed at once by the next.
const Batch = 100

// Run sweeps every interval until ctx is done. A failed sweep is logged and
// tried again at the next tick.
func Run(ctx context.Context, st Expirer, every time.Duration, log *slog.Logger) {
	periodic.Run(ctx, every, func(ctx context.Context) {
		n, err := Once(ctx, st)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("hold sweep failed; retrying at the next tick", "ended", n, "error", err.Error())
		case n > 0:
			log.Info("hold sweep ended expired holds", "ended", n)
		}
	})
}

// Once calls ExpireHolds until a call ends fewer than Batch holds (so an
// idle store costs one call) or ctx is done, and returns how many holds it
// ended.
func Once(ctx context.Context, st Expirer) (int, error) {
	total := 0
	for ctx.Err() == nil {
		n, err := st.ExpireHolds(ctx, Batch)
		total += n
		if err != nil || n < Batch {
			return total, err
		}
	}
	return total, ctx.Err()
}
