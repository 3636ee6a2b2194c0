// Package periodic runs the background loops of a Stipend instance (the
// hold sweep, the Stripe sweep, the idempotency ledger's purge): one step
// every interval until the context is done.
package periodic

import (
	"context"
	"time"
)

// Run calls step every interval, the first time one interval after it
// starts, until ctx is done; a step that takes longer than the interval
// delays the next one (ticks do not queue up). No step starts once ctx is
// done; Run returns then, when no step is running.
func Run(ctx context.Context, every time.Duration, step func(context.Context)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if ctx.Err() != nil { // both were ready: select picks either
			return
		}
		step(ctx)
	}
}
