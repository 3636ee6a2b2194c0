package firestore

import (
	"context"
	"sync"
	"time"
)

// The store's goroutines: the lanes' drainers (store/internal/coalesce),
// the shared readers' drainers (reads.go), lease refills and the idle
// checks of lease lanes (lease_refill.go). Close stops them all and waits.

// background tracks the store's goroutines other than the lanes' drainers.
// Once closed, it starts no more.
type background struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// enter reports whether work may start, counting it until leave; false
// once the store is closing.
func (g *background) enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	return true
}

func (g *background) leave() { g.wg.Done() }

// goFn runs fn in a goroutine of the group, unless the group is closed.
func (g *background) goFn(fn func()) bool {
	if !g.enter() {
		return false
	}
	go func() {
		defer g.leave()
		fn()
	}()
	return true
}

// close refuses new work and waits for what runs.
func (g *background) close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}

// closeTimeout bounds the release of this instance's leases in Close.
const closeTimeout = 5 * time.Second

// Close stops the store: it refuses new calls on entitlements, lets the
// batches already queued finish, folds this instance's escrow leases back
// into their entitlements (within closeTimeout; a lease not released then is
// folded by the next gather that needs it), and waits for every goroutine
// the store started. It does not close the client, which the caller owns:
// close it after. Close is safe to call more than once.
func (s *Store) Close() error {
	s.lanes.Close()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	err := s.ReleaseLeases(ctx)
	s.bg.close()
	return err
}
