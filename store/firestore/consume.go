package firestore

import (
	"context"
	"sync/atomic"
	"time"

	"cloud.google.com/go/firestore"
	"golang.org/x/sync/errgroup"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The consume path: charge.Consume and charge.Check hold the candidate
// rules; this adapter provides the lookups of charge.Charger and the atomic
// step, ConsumeOne, which queues on the entitlement's lane (store/internal/coalesce)
// to be applied in a batch (batch.go).

var _ charge.Charger = (*Store)(nil)

// CheckAndConsume implements store.EntitlementStore.
// The candidates query starts with the key and account reads (which the
// shared reader sends as one GetAll), so a consume waits for the slower of
// them, not for both in turn.
//
// A denial decided on candidates read through the candidates document is
// answered only from the queries (queriedCharger): the document is the
// fast way to what can pay, never the word on what cannot. It names every
// grant made through this version of the store, but an instance of an
// older version (during a rolling upgrade) grants without writing it; so
// such a grant is never refused, at the cost of the queries on a denial.
func (s *Store) CheckAndConsume(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	c := s.consumeCharger(ctx, &req)
	res, err := charge.Consume(ctx, c, req)
	if err == nil && res.Outcome == store.Denied && c.indexed.Load() {
		return charge.Consume(ctx, queriedCharger{s, false}, req)
	}
	return res, err
}

// Check implements store.EntitlementStore; a denial is answered from the
// queries, as CheckAndConsume's.
func (s *Store) Check(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	c := checkCharger{s, new(atomic.Bool)}
	res, err := charge.Check(ctx, c, req, s.clock())
	if err == nil && res.Outcome == store.Denied && c.indexed.Load() {
		return charge.Check(ctx, queriedCharger{s, true}, req, s.clock())
	}
	return res, err
}

// queriedCharger is the store with the candidates read by the queries
// (exact if asked).
type queriedCharger struct {
	*Store
	exact bool
}

// ActiveEntitlements implements charge.Charger.
func (c queriedCharger) ActiveEntitlements(ctx context.Context, agentID string) (charge.Pool, error) {
	return c.queriedPool(ctx, agentID, c.exact)
}

func (s *Store) consumptionRef(agentID, key string) *firestore.DocumentRef {
	return s.col(colConsumptions).Doc(entitlement.ConsumptionKey(agentID, key))
}

// ConsumeOne implements charge.Charger: it queues the call on the
// entitlement's lane and waits for its own result.
func (s *Store) ConsumeOne(ctx context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error) {
	o := s.queue(entitlementID, &call{ctx: ctx, op: opConsume, consume: req, fingerprint: req.Fingerprint(),
		key: entitlement.ConsumptionKey(req.AgentID, req.IdempotencyKey)})
	return o.consume, o.err
}

// FindKey implements charge.Charger: one point read of the key's document,
// which holds a consumption, a hold, or both.
func (s *Store) FindKey(ctx context.Context, agentID, key string) (charge.Used, error) {
	snap, err := s.get(ctx, s.consumptionRef(agentID, key))
	if err != nil {
		return charge.Used{}, fsfault.Read(err, "find idempotency key")
	}
	if !snap.Exists() {
		// The key stays out of the message: it may be sensitive.
		return charge.Used{}, store.Errorf(store.CodeNotFound, "idempotency key")
	}
	k, err := keyFrom(snap)
	if err != nil {
		return charge.Used{}, err
	}
	return k.Used(s.clock()), nil
}

// readKey reads the consumptions document id (a consumption's or a hold's
// ID) outside a transaction; a missing one is a zero keyDoc.
func (s *Store) readKey(ctx context.Context, id, what string) (keyDoc, error) {
	snap, err := s.get(ctx, s.col(colConsumptions).Doc(docID(id)))
	if err != nil {
		return keyDoc{}, fsfault.Read(err, "%s", what)
	}
	if !snap.Exists() {
		return keyDoc{}, nil
	}
	return keyFrom(snap)
}

// GetConsumption implements store.EntitlementStore. A hold's document is
// a consumption only once the hold was captured.
func (s *Store) GetConsumption(ctx context.Context, id string) (entitlement.Consumption, error) {
	k, err := s.readKey(ctx, id, "get consumption")
	if err != nil {
		return entitlement.Consumption{}, err
	}
	if k.Cons == nil {
		return entitlement.Consumption{}, consumptionNotFound(id)
	}
	return *k.Cons, nil
}

// ListConsumptions implements store.EntitlementStore: the account's
// consumptions are those it made (agentId) or, for a wallet, those its
// members charged to it (walletId). An ID is an agent's or a wallet's,
// never both, so one of the two queries, run at once, finds nothing, and
// the page is the other's; both are ordered alike, so one cursor serves
// both.
func (s *Store) ListConsumptions(ctx context.Context, agentID string, since time.Time, p store.Page) ([]entitlement.Consumption, string, error) {
	key := listKey(qConsumptionsByAgent, agentID, since.UTC().Format(time.RFC3339Nano))
	page := func(q Query, field string) func() ([]entitlement.Consumption, string, error) {
		filters := []filter{{field, "==", agentID}}
		if !since.IsZero() {
			filters = append(filters, filter{"occurredAt", ">=", stamp(since)})
		}
		return func() ([]entitlement.Consumption, string, error) {
			return list(ctx, s.build(q, filters...), key, q.Order, p, consumptionFrom)
		}
	}
	var (
		g          errgroup.Group
		wallet     []entitlement.Consumption
		walletNext string
	)
	g.Go(func() (err error) {
		wallet, walletNext, err = page(qConsumptionsByWallet, "walletId")()
		return err
	})
	own, next, err := page(qConsumptionsByAgent, "agentId")()
	if werr := g.Wait(); err == nil {
		err = werr
	}
	if err != nil || len(wallet) == 0 {
		return own, next, err
	}
	return wallet, walletNext, nil
}
