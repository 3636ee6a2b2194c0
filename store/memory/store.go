// Package memory is the embedded, in-process store for development and
// tests. It passes the same conformance suites as the Firestore store, but
// nothing it holds survives the process, and it cannot be shared between
// instances: it is never used in production.
package memory

import (
	"sync"
	"time"
)

// Store keeps everything in maps behind one mutex.
type Store struct {
	mu  sync.Mutex
	now func() time.Time

	// inbound holds recorded provider events by store.InboundKey, with the
	// time each was first seen; payment changes and RecordInboundEvent share it.
	inbound map[string]time.Time
	// delivery is the webhook delivery state (delivery.go).
	delivery deliveryState
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{now: time.Now, inbound: make(map[string]time.Time)}
	for _, o := range opts {
		o(s)
	}
	return s
}
