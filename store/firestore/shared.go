package firestore

import (
	"context"
	"sync/atomic"
	"time"
)

// sharedContext is the context of work done once for several callers (a
// lane's batch transaction, a shared point read). The work serves every
// caller still waiting, so it must not end while one of them waits, nor run
// on for nobody: it ends when the last caller has left (cancelled, or past
// its deadline), and its deadline is the latest of theirs (capped at limit
// from now; limit itself when a caller has none), which the backend sees as
// the RPCs' deadline and the retry loop plans with. stop releases it.
func sharedContext(callers []context.Context, limit time.Duration) (ctx context.Context, stop func()) {
	deadline := time.Now().Add(limit)
	var latest time.Time
	bounded := len(callers) > 0
	for _, c := range callers {
		d, ok := c.Deadline()
		if !ok {
			bounded = false
			break
		}
		if d.After(latest) {
			latest = d
		}
	}
	if bounded && latest.Before(deadline) {
		deadline = latest
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	var waiting atomic.Int64
	waiting.Store(int64(len(callers)))
	stops := make([]func() bool, len(callers))
	for i, c := range callers {
		stops[i] = context.AfterFunc(c, func() {
			if waiting.Add(-1) == 0 {
				cancel()
			}
		})
	}
	return ctx, func() {
		for _, s := range stops {
			s()
		}
		cancel()
	}
}
