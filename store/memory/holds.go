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
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// Every change of a stored entitlement goes through the charge engine
// (store/internal/charge): start makes the copy to change, with the lazy
// resets applied and the holds past their expiry already ended (every
// transaction on an entitlement ends them first), and commitBatch writes it
// back, marks those holds expired and adds the events. A call that fails
// before commitBatch leaves the store as it was.

// start sets b, the charge engine, on a copy of the stored entitlement e
// (nil: absent) at now, sharing nothing the rules change with e, and
// returns the IDs of the holds it ended. b is the caller's (on its stack:
// the development hot path allocates no engine).
func start(b *charge.Batch, id string, e *entitlement.Entitlement, now time.Time) []string {
	*b = charge.Batch{Now: now, ID: id}
	if e != nil {
		b.E, b.Found = *e, true
		b.E.Holds = slices.Clone(e.Holds) // nil stays nil: a consume without holds allocates nothing here
	}
	return b.Start()
}

// commitBatch stores what b did to the stored entitlement e: its new state, the
// holds it ended by expiry, its events. A denial keeps the lazy reset and
// the end of expired holds, which change nothing a caller can see. Only
// encoding an event can fail, and then nothing is written. Callers hold
// s.mu.
func (s *Store) commitBatch(e *entitlement.Entitlement, b *charge.Batch, expired []string) error {
	if e == nil {
		return nil
	}
	var evs []event.Event
	if len(b.Events) > 0 { // the clock is read only for events
		ps := make([]unit.Pending, len(b.Events))
		for i, ev := range b.Events {
			ps[i] = unit.Pending(ev)
		}
		var err error
		if evs, err = unit.Events(s.clock(), ps...); err != nil {
			return err
		}
	}
	*e = b.E
	s.endHolds(expired, entitlement.HoldExpired, b.Now)
	for id := range b.MembersChanged {
		s.members.put(*b.Members[id])
	}
	s.events.add(evs...)
	return nil
}

// loadMember gives b the membership of agentID in the wallet that owns
// b's entitlement, a copy the engine may change, when agentID is not the
// owner and is a member. Callers hold s.mu.
func (s *Store) loadMember(b *charge.Batch, agentID string) {
	if !b.Found || b.E.AgentID == agentID {
		return
	}
	if m := s.members.get(b.E.AgentID, agentID); m != nil {
		c := m.Clone()
		b.Members = map[string]*entitlement.Membership{agentID: &c}
	}
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
	var b charge.Batch
	expired := start(&b, entitlementID, stored, now)
	s.loadMember(&b, req.AgentID)
	var r charge.Record // the key is unused
	res := b.Authorize(req, &r, uuid.NewString(), req.Fingerprint())
	if err := s.commitBatch(stored, &b, expired); err != nil {
		return store.HoldResult{}, err
	}
	if r.Hold != nil {
		s.putHold(r.Hold)
	}
	return res, nil
}

// GetHold returns the hold as it is now, or ErrNotFound.
func (s *Store) GetHold(_ context.Context, id string) (entitlement.Hold, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h, err := found(s.holds, id, copyHold, store.Errorf(store.CodeNotFound, "hold %q", id))
	h.Refresh(s.clock())
	return h, err
}

// CaptureHold charges amount (nil fields: the hold's maximum) to the open
// hold id of agentID, returning the rest of the reservation.
func (s *Store) CaptureHold(_ context.Context, id, agentID string, amount entitlement.Amount) (store.HoldResult, error) {
	return s.finishHold(id, agentID, func(b *charge.Batch, r *charge.Record) (store.HoldResult, error) {
		return b.Capture(r, id, agentID, amount, uuid.NewString())
	})
}

// ReleaseHold returns all that the open hold id of agentID reserved.
func (s *Store) ReleaseHold(_ context.Context, id, agentID string) (store.HoldResult, error) {
	return s.finishHold(id, agentID, func(b *charge.Batch, r *charge.Record) (store.HoldResult, error) {
		return b.Release(r, id, agentID)
	})
}

// finishHold runs a capture or release (apply) of agentID's hold id with
// the charge engine on the hold's entitlement, and stores the hold as it
// ended and the capture's consumption.
func (s *Store) finishHold(id, agentID string, apply func(*charge.Batch, *charge.Record) (store.HoldResult, error)) (store.HoldResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.holds[id]
	if h == nil || h.AgentID != agentID { // another agent's hold is as if absent
		return store.HoldResult{}, store.Errorf(store.CodeNotFound, "hold %q", id)
	}
	e := s.entitlements[h.EntitlementID]
	b := &charge.Batch{}
	expired := start(b, h.EntitlementID, e, s.clock())
	s.loadMember(b, agentID)
	b.Consumption = func(cid string) (entitlement.Consumption, error) {
		if c := s.consumptions[cid]; c != nil {
			return copyConsumption(c), nil
		}
		return entitlement.Consumption{}, store.Errorf(store.CodeInternal, "corrupt data: hold %s names missing consumption %s", id, cid)
	}
	ended := copyHold(h)
	r := charge.Record{Hold: &ended}
	charge.EndExpired(&r, expired, b.Now)
	res, err := apply(b, &r)
	if store.CodeOf(err) == store.CodeInternal {
		return store.HoldResult{}, err
	}
	if cerr := s.commitBatch(e, b, expired); cerr != nil {
		return store.HoldResult{}, cerr
	}
	if err != nil {
		return store.HoldResult{}, err
	}
	if res.Outcome == store.Captured || res.Outcome == store.Released {
		*h = copyHold(&ended)
	}
	if res.Outcome == store.Captured {
		s.putConsumption(r.Cons)
	}
	return res, nil
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
		var b charge.Batch
		expired := start(&b, e.ID, e, now)
		if len(expired) == 0 {
			continue
		}
		if err := s.commitBatch(e, &b, expired); err != nil {
			return ended, err
		}
		ended += len(expired)
		touched++
	}
	return ended, nil
}
