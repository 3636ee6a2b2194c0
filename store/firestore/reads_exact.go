package firestore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// Reads are exact: an entitlement with open leases is shown with its
// leases folded (entitlement.Entitlement.Exact), the lease documents read
// at the read time of the entitlement's, so the two are one consistent
// snapshot. An entitlement without leases costs no extra read.

// exact folds into e, as read at readTime, its open leases as they were then.
func (s *Store) exact(ctx context.Context, e *entitlement.Entitlement, readTime time.Time) error {
	if len(e.Leases) == 0 {
		return nil
	}
	// One read per lease: Client.WithReadOptions would change the shared
	// client for every later read, a DocumentRef's options are its own.
	refs := s.leaseRefs(e)
	leases := make([]entitlement.Lease, len(refs))
	for i, ref := range refs {
		snap, err := ref.WithReadOptions(firestore.ReadTime(readTime)).Get(ctx)
		if isNotFound(err) {
			return corruptLease(ref)
		} else if err != nil {
			return fsfault.Read(err, "read the leases of entitlement %q", e.ID)
		}
		if leases[i], err = leaseFrom(snap); err != nil {
			return err
		}
	}
	e.Exact(leases)
	return nil
}

// storedEntitlement is GetEntitlement without the leases: the entitlement
// as stored, for the consume path, whose batch decides from what it reads
// in its own transaction.
func (s *Store) storedEntitlement(ctx context.Context, id string) (entitlement.Entitlement, *firestore.DocumentSnapshot, error) {
	snap, err := s.get(ctx, s.entitlementRef(id))
	if err != nil {
		return entitlement.Entitlement{}, nil, fsfault.Read(err, "get entitlement")
	}
	if !snap.Exists() {
		return entitlement.Entitlement{}, nil, store.Errorf(store.CodeNotFound, "entitlement %q", id)
	}
	e, err := entitlementFrom(snap)
	return e, snap, err
}

// consumeCharger is the store as the consume path (charge.Consume,
// charge.Authorize) uses it: candidates as stored, since only their order
// and static checks matter before the atomic step; their queries started
// before the key lookup (active).
type consumeCharger struct {
	*Store
	// active answers the queries of agent's candidates started early;
	// nil: query when asked.
	agent  string
	active func() (charge.Pool, error)
	// indexed is set when agent's candidates were read through its
	// candidates document (candidates.go).
	indexed *atomic.Bool
}

// consumeCharger starts the queries of req's agent's candidates, unless
// req names its entitlement (or is invalid, which charge.Consume answers),
// and returns the charger that answers with them.
func (s *Store) consumeCharger(ctx context.Context, req *entitlement.ConsumeRequest) consumeCharger {
	c := consumeCharger{Store: s, agent: req.AgentID, indexed: new(atomic.Bool)}
	if req.EntitlementID != "" || !entitlement.ValidName(req.AgentID) {
		return c
	}
	type result struct {
		pool charge.Pool
		err  error
	}
	ch := make(chan result, 1) // never waits: a replay answers without it
	go func() {
		p, indexed, err := s.pool(ctx, c.agent, false)
		c.indexed.Store(indexed)
		ch <- result{p, err}
	}()
	c.active = sync.OnceValues(func() (charge.Pool, error) {
		r := <-ch
		return r.pool, r.err
	})
	return c
}

// ActiveEntitlements implements charge.Charger with the queries started
// early, when they were.
func (c consumeCharger) ActiveEntitlements(ctx context.Context, agentID string) (charge.Pool, error) {
	if c.active == nil || agentID != c.agent {
		p, indexed, err := c.pool(ctx, agentID, false)
		if agentID == c.agent {
			c.indexed.Store(indexed)
		}
		return p, err
	}
	return c.active()
}

// checkCharger is the store as charge.Check uses it: every candidate exact,
// so a dry run answers what a consume would.
type checkCharger struct {
	*Store
	indexed *atomic.Bool // as consumeCharger's, for any agent asked
}

// ActiveEntitlements implements charge.Charger with exact entitlements.
func (c checkCharger) ActiveEntitlements(ctx context.Context, agentID string) (charge.Pool, error) {
	p, indexed, err := c.pool(ctx, agentID, true)
	if indexed {
		c.indexed.Store(true)
	}
	return p, err
}
