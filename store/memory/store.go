// Package memory is the embedded, in-process store for development and
// tests. It passes the same conformance suites as the Firestore store, but
// nothing it holds survives the process, and it cannot be shared between
// instances: it is never used in production.
package memory

import (
	"context"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
	"github.com/stipend-mcp/stipend/store/internal/ops"
	"github.com/stipend-mcp/stipend/topup"
)

var (
	_ store.EntitlementStore = (*Store)(nil)
	_ charge.Charger         = (*Store)(nil)
)

// Store keeps everything in maps behind one mutex. Every method holds the
// mutex for its whole work, so each one is atomic, but Check and Authorize:
// they run the candidate loop of package charge, each step under the mutex,
// as the contract allows. Stored values are never handed out, only deep
// copies.
type Store struct {
	mu  sync.Mutex
	now func() time.Time
	// shared is the methods off the hot path (package ops) on this
	// store's unit of work (unit.go).
	shared

	// inbound holds recorded provider events by unit.InboundKey, with the
	// time each was first seen; payment changes and RecordInboundEvent share it.
	inbound map[string]time.Time
	// endpoints and deliveries are the webhook state by ID (delivery.go);
	// byDeliveryKey maps an EnqueueDelivery key to its delivery ID.
	endpoints     map[string]store.Endpoint
	deliveries    map[string]store.Delivery
	byDeliveryKey map[string]string

	accounts map[string]*entitlement.Account
	// claims are the background jobs' claims by name (store.Claimer).
	claims map[string]store.Claim
	// entitlements by ID; agents indexes them (and the rest) per agent.
	entitlements map[string]*entitlement.Entitlement
	agents       map[string]*agentIndex
	// keys says what each agent's idempotency key was used for, a consume
	// or a hold (consumptions.go); consumptions and holds are those records
	// by ID. An entitlement's open holds are kept with it (Holds).
	keys         map[consumptionKey]use
	consumptions map[string]*entitlement.Consumption
	holds        map[string]*entitlement.Hold

	payments map[string]*payment.Payment
	byPayKey map[string]string // idempotency key → payment ID
	byIntent map[string]string // provider intent ID → payment ID
	receipts map[string]*receipt.Signed
	events   outbox
	topups   map[string]*topup.TopUp // by agent ID (topup.go)

	portal map[string]*portal.Session // portal sessions by ID (portal.go)

	members memberships // the wallets' members (wallets.go)
}

// agentIndex holds one agent's rows in list order.
type agentIndex struct {
	// entitlements in creation order (CreatedAt, then ID).
	entitlements []*entitlement.Entitlement
	// active are the entitlements not revoked, for candidate selection.
	active []*entitlement.Entitlement
	// consumptions and receipts sorted by time, then ID.
	consumptions []*entitlement.Consumption
	receipts     []*receipt.Signed
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns an empty store.
func New(opts ...Option) *Store {
	s := &Store{
		now:          time.Now,
		inbound:      make(map[string]time.Time),
		accounts:     make(map[string]*entitlement.Account),
		entitlements: make(map[string]*entitlement.Entitlement),
		agents:       make(map[string]*agentIndex),
		keys:         make(map[consumptionKey]use),
		consumptions: make(map[string]*entitlement.Consumption),
		holds:        make(map[string]*entitlement.Hold),
		payments:     make(map[string]*payment.Payment),
		byPayKey:     make(map[string]string),
		byIntent:     make(map[string]string),
		receipts:     make(map[string]*receipt.Signed),
		events:       newOutbox(),
		topups:       make(map[string]*topup.TopUp),
		claims:       make(map[string]store.Claim),
		portal:       make(map[string]*portal.Session),
		members:      newMemberships(),

		endpoints:     make(map[string]store.Endpoint),
		deliveries:    make(map[string]store.Delivery),
		byDeliveryKey: make(map[string]string),
	}
	for _, o := range opts {
		o(s)
	}
	s.shared = ops.New(s.unit)
	return s
}

// clock returns the current time in UTC. Callers hold s.mu.
func (s *Store) clock() time.Time { return s.now().UTC() }

// agent returns the index of agentID, creating it. Callers hold s.mu.
func (s *Store) agent(agentID string) *agentIndex {
	a := s.agents[agentID]
	if a == nil {
		a = &agentIndex{}
		s.agents[agentID] = a
	}
	return a
}

// Ping always succeeds unless ctx is done: the store is in memory.
func (s *Store) Ping(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return store.Wrap(store.CodeUnavailable, err, "ping")
	}
	return nil
}

// Close implements store.EntitlementStore. The memory store starts no
// goroutines, so there is nothing to stop; it keeps answering.
func (s *Store) Close() error { return nil }
