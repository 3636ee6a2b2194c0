package memory

import (
	"context"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// Every change of a stored entitlement goes through edit and commit: edit
// makes the copy to change, with the holds past their expiry already ended
// (every transaction on an entitlement ends them first), and commit writes
// it back and marks those holds expired. A call that fails between the two
// leaves the store as it was.

// edit returns a copy of the stored entitlement e to change at now, sharing
// nothing the rules change with e, and the IDs of the holds it ended.
func edit(e *entitlement.Entitlement, now time.Time) (entitlement.Entitlement, []string) {
	next := *e
	next.Holds = slices.Clone(e.Holds) // nil stays nil: a consume without holds allocates nothing here
	return next, next.ExpireHolds(now)
}

// commit stores next as e and marks expired the holds edit ended. Callers
// hold s.mu.
func (s *Store) commit(e, next *entitlement.Entitlement, expired []string, now time.Time) {
	*e = *next
	s.endHolds(expired, entitlement.HoldExpired, now)
}

// endHolds records that the holds ids ended in status at now. Callers hold s.mu.
func (s *Store) endHolds(ids []string, status entitlement.HoldStatus, now time.Time) {
	for _, id := range ids {
		if h := s.holds[id]; h != nil {
			h.End(status, now)
		}
	}
}

// Authorize reserves req's maximum on the entitlement a consume would
// charge: charge.Authorize's candidate loop, each candidate in AuthorizeOne.
func (s *Store) Authorize(ctx context.Context, req entitlement.HoldRequest) (store.HoldResult, error) {
	return charge.Authorize(ctx, s, req)
}

// AuthorizeOne is the atomic step of charge.Authorize (charge.Charger):
// under the mutex it re-checks the key, then reserves on the one
// entitlement.
func (s *Store) AuthorizeOne(_ context.Context, req *entitlement.HoldRequest, entitlementID string) (store.HoldResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	if prior, ok := s.used(req.AgentID, req.IdempotencyKey, now); ok {
		return charge.HoldReplayOf(prior, req), nil
	}
	stored := s.entitlements[entitlementID]
	if stored == nil || stored.AgentID != req.AgentID {
		return charge.HoldDeniedBy(entitlementID, entitlement.ReasonNotFound), nil
	}
	next, expired := edit(stored, now)
	h, reason := next.Authorize(now, req, uuid.NewString(), req.Fingerprint())
	s.commit(stored, &next, expired, now) // a denial keeps the lazy reset and the expiries
	if reason != "" {
		return charge.HoldDeniedBy(entitlementID, reason), nil
	}
	s.putHold(&h)
	return store.HoldResult{Outcome: store.Held, Hold: h, Entitlement: shown(stored, now)}, nil
}

// GetHold returns the hold as it is now, or ErrNotFound.
func (s *Store) GetHold(_ context.Context, id string) (entitlement.Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[id]
	if h == nil {
		return entitlement.Hold{}, store.Errorf(store.CodeNotFound, "hold %q", id)
	}
	out := copyHold(h)
	out.Refresh(s.clock())
	return out, nil
}

// ownHold returns the stored hold id if agentID owns it; another agent's
// hold is NotFound, as if absent. Callers hold s.mu.
func (s *Store) ownHold(id, agentID string) (*entitlement.Hold, error) {
	h := s.holds[id]
	if h == nil || h.AgentID != agentID {
		return nil, store.Errorf(store.CodeNotFound, "hold %q", id)
	}
	return h, nil
}

// CaptureHold charges amount (nil fields: the hold's maximum) to the open
// hold id of agentID, returning the rest of the reservation.
func (s *Store) CaptureHold(_ context.Context, id, agentID string, amount entitlement.Amount) (store.HoldResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.ownHold(id, agentID)
	if err != nil {
		return store.HoldResult{}, err
	}
	ch, err := h.Settle(amount)
	if err != nil {
		return store.HoldResult{}, store.Wrap(store.CodeInvalid, err, "capture of hold %q", id)
	}
	now := s.clock()
	switch h.Status {
	case entitlement.HoldCaptured:
		if *h.Captured != ch {
			return store.HoldResult{}, store.Errorf(store.CodeConflict, "hold %q was captured with another amount", id)
		}
		return store.HoldResult{Outcome: store.Replay, Hold: copyHold(h), Consumption: copyConsumption(s.consumptions[h.ConsumptionID])}, nil
	case entitlement.HoldReleased:
		return store.HoldResult{}, store.Errorf(store.CodeConflict, "hold %q was released", id)
	case entitlement.HoldExpired:
		return store.HoldResult{}, store.Wrap(store.CodeConflict, entitlement.ErrHoldExpired, "hold %q", id)
	}
	e := s.entitlements[h.EntitlementID]
	next, expired := edit(e, now)
	captured := copyHold(h)
	c, ok := next.Capture(now, &captured, ch, uuid.NewString())
	if !ok {
		// Capture refuses only a hold no longer on its entitlement: this
		// one, past its expiry, which edit has just ended.
		s.commit(e, &next, expired, now)
		return store.HoldResult{}, store.Wrap(store.CodeConflict, entitlement.ErrHoldExpired, "hold %q", id)
	}
	res := store.HoldResult{Outcome: store.Captured, Hold: captured, Entitlement: next.Clone(), Consumption: c}
	var depleted []event.Event
	if c.Depleted() || c.LowBalance {
		if depleted, err = s.newEvents(chargeEvents(&c, &res.Entitlement)...); err != nil {
			return store.HoldResult{}, err
		}
	}
	s.commit(e, &next, expired, now)
	*h = copyHold(&captured)
	s.putConsumption(&c)
	s.events.add(depleted...)
	return res, nil
}

// ReleaseHold returns all that the open hold id of agentID reserved.
func (s *Store) ReleaseHold(_ context.Context, id, agentID string) (store.HoldResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := s.ownHold(id, agentID)
	if err != nil {
		return store.HoldResult{}, err
	}
	now := s.clock()
	switch h.Status {
	case entitlement.HoldCaptured:
		return store.HoldResult{}, store.Errorf(store.CodeConflict, "hold %q was captured", id)
	case entitlement.HoldReleased, entitlement.HoldExpired:
		return store.HoldResult{Outcome: store.Replay, Hold: copyHold(h)}, nil
	}
	e := s.entitlements[h.EntitlementID]
	next, expired := edit(e, now)
	released := copyHold(h)
	if !next.Release(now, &released) {
		// Only a hold past its expiry is open but no longer on its
		// entitlement: edit has just ended it, and a release of an
		// expired hold is a replay.
		s.commit(e, &next, expired, now)
		return store.HoldResult{Outcome: store.Replay, Hold: copyHold(h)}, nil
	}
	s.commit(e, &next, expired, now)
	*h = copyHold(&released)
	return store.HoldResult{Outcome: store.Released, Hold: released, Entitlement: shown(e, now)}, nil
}

// ExpireHolds ends the holds past their expiry on up to limit entitlements
// and returns how many it ended. The store keeps no index of expiries: it
// looks at every entitlement with open holds, which a development store can
// afford.
func (s *Store) ExpireHolds(_ context.Context, limit int) (int, error) {
	if limit <= 0 {
		return 0, store.Errorf(store.CodeInvalid, "limit: must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.clock()
	ended, touched := 0, 0
	for _, e := range s.entitlements {
		if touched == limit {
			break
		}
		if len(e.Holds) == 0 {
			continue
		}
		next, expired := edit(e, now)
		if len(expired) == 0 {
			continue
		}
		s.commit(e, &next, expired, now)
		ended += len(expired)
		touched++
	}
	return ended, nil
}
