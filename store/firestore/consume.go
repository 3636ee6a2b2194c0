package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// The consume path: charge.Consume and charge.Check hold the candidate
// rules; this adapter provides the lookups of charge.Charger and the atomic
// step, ConsumeOne, which coalesces concurrent calls (coalesce.go).

var _ charge.Charger = (*Store)(nil)

// CheckAndConsume implements store.EntitlementStore.
func (s *Store) CheckAndConsume(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return charge.Consume(ctx, s, req)
}

// Check implements store.EntitlementStore.
func (s *Store) Check(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return charge.Check(ctx, s, req, s.clock())
}

func (s *Store) consumptionRef(agentID, key string) *firestore.DocumentRef {
	return s.col(colConsumptions).Doc(entitlement.ConsumptionKey(agentID, key))
}

// FindConsumption implements charge.Charger.
func (s *Store) FindConsumption(ctx context.Context, agentID, key string) (entitlement.Consumption, error) {
	snap, err := s.get(ctx, s.consumptionRef(agentID, key))
	if err != nil {
		return entitlement.Consumption{}, fsfault.Read(err, "find consumption")
	}
	if !snap.Exists() {
		// The key stays out of the message: it may be sensitive.
		return entitlement.Consumption{}, store.Errorf(store.CodeNotFound, "consumption")
	}
	return consumptionFrom(snap)
}

// ListConsumptions implements store.EntitlementStore.
func (s *Store) ListConsumptions(ctx context.Context, agentID string, since time.Time, p store.Page) ([]entitlement.Consumption, string, error) {
	filters := []filter{{"agentId", "==", agentID}}
	if !since.IsZero() {
		filters = append(filters, filter{"occurredAt", ">=", stamp(since)})
	}
	key := listKey(qConsumptionsByAgent, agentID, since.UTC().Format(time.RFC3339Nano))
	return list(ctx, s.build(qConsumptionsByAgent, filters...), key, qConsumptionsByAgent.Order, p, consumptionFrom)
}

// applyBatch is the body of one consume transaction for calls on one
// entitlement: it reads the entitlement and every call's consumption
// document at once, applies the calls in order (a key seen earlier in the
// batch, or already stored, is a replay or conflict of that consumption),
// then writes the entitlement once and creates each new consumption. It
// only computes from what it reads, so it may run more than once.
func (s *Store) applyBatch(tx *firestore.Transaction, entitlementID string, calls []*call) ([]store.ConsumeResult, error) {
	now := s.clock()
	entRef := s.entitlementRef(entitlementID)
	refs := []*firestore.DocumentRef{entRef}
	keys := make([]string, len(calls))
	seen := make(map[string]bool, len(calls))
	for i, c := range calls {
		keys[i] = entitlement.ConsumptionKey(c.req.AgentID, c.req.IdempotencyKey)
		if !seen[keys[i]] {
			seen[keys[i]] = true
			refs = append(refs, s.col(colConsumptions).Doc(keys[i]))
		}
	}
	snaps, err := tx.GetAll(refs)
	if err != nil {
		return nil, err
	}
	stored := make(map[string]entitlement.Consumption, len(calls))
	for _, snap := range snaps[1:] {
		if snap.Exists() {
			c, err := consumptionFrom(snap)
			if err != nil {
				return nil, err
			}
			stored[snap.Ref.ID] = c
		}
	}
	var e entitlement.Entitlement
	found := snaps[0].Exists()
	if found {
		if e, err = entitlementFrom(snaps[0]); err != nil {
			return nil, err
		}
	}

	results := make([]store.ConsumeResult, len(calls))
	var created []entitlement.Consumption
	changed := found && e.Refresh(now)
	for i, c := range calls {
		if prior, ok := stored[keys[i]]; ok {
			results[i] = charge.ReplayOf(prior, c.req)
			continue
		}
		if !found || e.AgentID != c.req.AgentID {
			results[i] = charge.DeniedBy(entitlementID, entitlement.ReasonNotFound)
			continue
		}
		cons, reason := e.Consume(now, c.req, keys[i], c.req.Fingerprint())
		if reason != "" {
			results[i] = charge.DeniedBy(entitlementID, reason)
			continue
		}
		changed = changed || e.Type != entitlement.TypeSubscription
		stored[keys[i]] = cons
		created = append(created, cons)
		after := e.Clone()
		results[i] = store.ConsumeResult{Outcome: store.Consumed, Consumption: cons, Entitlement: after}
		if cons.Depleted() {
			if err := s.enqueue(tx, event.EntitlementDepleted, e.AgentID, now, &after); err != nil {
				return nil, err
			}
		}
	}
	if changed {
		if err := tx.Set(entRef, entitlementDoc(&e)); err != nil {
			return nil, err
		}
	}
	for i := range created {
		if err := tx.Create(s.col(colConsumptions).Doc(created[i].ID), consumptionDoc(&created[i])); err != nil {
			return nil, err
		}
	}
	return results, nil
}
