// Package firestore is the production store, on Google Cloud Firestore in
// Native mode. Every instance of Stipend may share one database: all
// invariants are enforced by Firestore transactions, not by process memory.
//
// Named databases: the store works on whatever database its client points
// at. To use a database other than "(default)", build the client with
// firestore.NewClientWithDatabase(ctx, projectID, databaseID) and pass it to
// New; the collections, indexes (firestore.indexes.json) and rules
// (firestore.rules.example) are deployed to that database.
//
// The collections and their documents' fields: README.md.
package firestore

import (
	"log/slog"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/firestore/internal/escrow"
	"github.com/stipend-mcp/stipend/store/internal/coalesce"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// The collection names, before the prefix.
const (
	colAccounts            = "accounts"
	colEntitlements        = "entitlements"
	colConsumptions        = "consumptions"
	colPayments            = "payments"
	colPaymentsIdempotency = "payments_idempotency"
	colReceipts            = "receipts"
	colEvents              = "events"
	colInbound             = "delivery_inbound"
	colClaims              = "job_claims"
)

var _ store.EntitlementStore = (*Store)(nil)

// Store is the Firestore adapter.
type Store struct {
	client *firestore.Client
	prefix string
	now    func() time.Time
	// shared is the methods off the hot path (package ops) on this
	// store's unit of work (unit.go).
	shared

	// reads shares point reads of the consume path (reads.go).
	reads reader
	// lanes queues concurrent calls per entitlement (lane.go).
	lanes *coalesce.Lanes[*call, outcome]
	// holds remembers the holds this instance authorized (remembered.go).
	holds remembered
	// completions and failures share concurrent changes of one payment
	// (flight.go).
	completions flights[store.Completion]
	failures    flights[payment.Payment]
	// turns orders the different changes of one payment (flight.go).
	turns turns
	// maxBatch bounds the calls one batch transaction applies.
	maxBatch int
	// gather is how long a hot lane waits for its callers to come back.
	gather time.Duration
	// retryBudget bounds how long one consume batch retries contention.
	retryBudget time.Duration
	// owner names this instance on the leases it takes; leasing holds
	// them (lease.go, internal/escrow).
	owner    string
	leaseOpt LeaseOptions
	leasing  escrow.Lanes
	// owners remembers whose each entitlement read is, walletsOf the
	// wallets of each agent's last call (members.go).
	owners    owners
	walletsOf walletsOf
	counters  counters
	// bg holds the store's goroutines but the lanes' (close.go).
	bg background
	// log receives what the store's background work cannot return to a
	// caller (a lease release that failed).
	log *slog.Logger
}

// WithLogger sends what the store's background work cannot return to a
// caller (a failed release of idle leases) to l (default: slog.Default()).
func WithLogger(l *slog.Logger) Option { return func(s *Store) { s.log = l } }

// Option configures a Store.
type Option func(*Store)

// WithCollectionPrefix prepends prefix to every collection name, for running
// several deployments (or test runs) in one database.
func WithCollectionPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithClock makes the store read time from now instead of time.Now.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithMaxBatch bounds how many concurrent calls on one entitlement
// (consumes, holds, captures, releases, refunds) are applied in one
// transaction (default 200; at most 400). Whatever the bound, a batch takes
// on no more calls than keep its commit within Firestore's 500 writes; the
// rest wait for the next batch.
func WithMaxBatch(n int) Option {
	return func(s *Store) {
		if n >= 1 && n <= 400 {
			s.maxBatch = n
		}
	}
}

// New returns a store on client. The caller owns the client (and chooses
// the project and named database when creating it).
func New(client *firestore.Client, opts ...Option) *Store {
	s := &Store{client: client, now: time.Now, maxBatch: 200, gather: 2 * time.Millisecond, retryBudget: 20 * time.Second,
		owner: uuid.NewString(), leaseOpt: LeaseOptions{Idle: 2 * time.Second, TTL: defaultLeaseTTL}}
	for _, o := range opts {
		o(s)
	}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.lanes = s.newLanes()
	s.shared = ops.New(s.unit)
	return s
}

// col returns the collection name with the configured prefix.
func (s *Store) col(name string) *firestore.CollectionRef {
	return s.client.Collection(s.prefix + name)
}

// doc returns the document of collection name whose ID is docID(id).
func (s *Store) doc(name, id string) *firestore.DocumentRef { return s.col(name).Doc(docID(id)) }

// clock returns the current time as stored: UTC, microsecond precision
// (Firestore keeps no finer timestamps).
//
// instantAfterReads: a transaction that writes an instant others are read
// against (a consumption's occurredAt, a hold's end, an entitlement's
// revokedAt, a refund receipt's issuedAt) reads the clock after its reads.
// Firestore's pessimistic transactions lock what they read until they
// commit, so a transaction that commits first has committed before the
// other one's reads returned; an instant read after them is later than its
// instant, and the audit trail reads in commit order (on one clock; across
// instances, within their clocks' skew). Read before, the instant would
// predate a wait on the lock, during which conflicting transactions commit
// later instants. Transaction bodies re-run on a retry, and read the clock
// again with their reads.
func (s *Store) clock() time.Time { return stamp(s.now()) }

// stamp normalises an instant to what Firestore stores.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
