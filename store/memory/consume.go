package memory

import (
	"context"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// CheckAndConsume charges one tool call, exactly once per (agent, key). The
// replay check, the candidate selection and the charge happen in one
// critical section, so the whole call is atomic (stronger than the contract
// asks) and touches the mutex once: this is the development hot path.
func (s *Store) CheckAndConsume(_ context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	if err := req.Normalize(); err != nil {
		return store.ConsumeResult{}, store.Wrap(store.CodeInvalid, err, "consume request")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if prior, ok := s.used(req.AgentID, req.IdempotencyKey, now); ok {
		return charge.ReplayOf(prior, &req), nil
	}
	if d, err := s.refuseCaller(&req); err != nil {
		return store.ConsumeResult{}, err
	} else if d != nil {
		return charge.AccountDenied(d), nil
	}
	if req.EntitlementID != "" {
		return s.consumeLocked(&req, s.entitlements[req.EntitlementID], req.EntitlementID, now)
	}
	var buf [8]*entitlement.Entitlement
	candidates, denials := charge.Order(buf[:0], s.active(req.AgentID), s.walletsOf(req.AgentID), req.Service, req.Tool)
	for _, e := range candidates {
		res, err := s.consumeLocked(&req, e, e.ID, now)
		if err != nil || res.Outcome != store.Denied {
			return res, err
		}
		denials = append(denials, res.Denials...)
	}
	return charge.Denied(denials), nil
}

// Check answers what CheckAndConsume would do now, without writing.
func (s *Store) Check(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return charge.Check(ctx, s, req, s.now().UTC())
}

// FindKey returns what the agent's key was used for (charge.Charger), or
// ErrNotFound.
func (s *Store) FindKey(_ context.Context, agentID, key string) (charge.Used, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	u, ok := s.used(agentID, key, s.clock())
	if !ok {
		return charge.Used{}, store.ErrNotFound
	}
	return u, nil
}

// ActiveEntitlements returns the agent's and its wallets' active
// entitlements as stored (lazy resets not applied), and its memberships
// (charge.Charger). The entitlements are shallow copies: this runs on every
// consume without an entitlement ID, and the parts they share with stored
// state (scope tools, metadata, expiry times, open holds) are never changed
// in place.
func (s *Store) ActiveEntitlements(_ context.Context, agentID string) (charge.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var p charge.Pool
	for _, e := range s.active(agentID) {
		p.Entitlements = append(p.Entitlements, *e)
	}
	for _, w := range s.walletsOf(agentID) {
		p.Members = append(p.Members, w.Member.Clone())
		for _, e := range w.Active {
			p.Entitlements = append(p.Entitlements, *e)
		}
	}
	return p, nil
}

// active returns the stored active entitlements of agentID. Callers hold s.mu.
func (s *Store) active(agentID string) []*entitlement.Entitlement {
	if a := s.agents[agentID]; a != nil {
		return a.active
	}
	return nil
}

// walletsOf returns agentID's wallets as charge.Order takes them, sharing
// stored state (nil for an agent that is no member, with no allocation).
// Callers hold s.mu.
func (s *Store) walletsOf(agentID string) []charge.Wallet {
	ms := s.members.byMember[agentID]
	if len(ms) == 0 {
		return nil
	}
	out := make([]charge.Wallet, 0, len(ms))
	for walletID, m := range ms {
		out = append(out, charge.Wallet{Member: m, Active: s.active(walletID)})
	}
	return out
}

// ConsumeOne is the atomic step of charge.Consume (charge.Charger): under
// the mutex it re-checks the key, then charges the one entitlement.
func (s *Store) ConsumeOne(_ context.Context, req *entitlement.ConsumeRequest, entitlementID string) (store.ConsumeResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if prior, ok := s.used(req.AgentID, req.IdempotencyKey, now); ok {
		return charge.ReplayOf(prior, req), nil
	}
	return s.consumeLocked(req, s.entitlements[entitlementID], entitlementID, now)
}

// consumeLocked charges req to the stored entitlement (nil if absent) at now
// and records the consumption. The caller holds s.mu and has checked that
// the agent's key is unused.
func (s *Store) consumeLocked(req *entitlement.ConsumeRequest, stored *entitlement.Entitlement, entitlementID string, now time.Time) (store.ConsumeResult, error) {
	var b charge.Batch
	expired := start(&b, entitlementID, stored, now)
	s.loadMember(&b, req.AgentID)
	var r charge.Record // the key is unused
	res := b.Consume(req, &r, uuid.NewString(), req.Fingerprint())
	if err := s.commitBatch(stored, &b, expired); err != nil {
		return store.ConsumeResult{}, err
	}
	if r.Cons != nil {
		s.putConsumption(r.Cons)
	}
	return res, nil
}

// ListConsumptions lists an agent's consumptions at or after since, oldest first.
func (s *Store) ListConsumptions(_ context.Context, agentID string, since time.Time, p store.Page) ([]entitlement.Consumption, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*entitlement.Consumption
	if a := s.agents[agentID]; a != nil {
		rows = a.consumptions
	}
	if !since.IsZero() {
		rows = rows[sort.Search(len(rows), func(i int) bool { return !rows[i].OccurredAt.Before(since) }):]
	}
	return paginate(rows, p, listID("consumptions", agentID, since.UTC().Format(time.RFC3339Nano)), consumptionPos, nil, copyConsumption)
}
