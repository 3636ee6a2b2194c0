package memory

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// topUp returns the stored top-up of agentID, creating it for a known
// account; nil for an unknown one. Callers hold s.mu.
func (s *Store) topUp(agentID string) *topup.TopUp {
	if s.accounts[agentID] == nil {
		return nil
	}
	if s.topups == nil {
		s.topups = make(map[string]*topup.TopUp)
	}
	t := s.topups[agentID]
	if t == nil {
		t = &topup.TopUp{AgentID: agentID}
		s.topups[agentID] = t
	}
	return t
}

func noAccount(agentID string) error { return store.Errorf(store.CodeNotFound, "account %q", agentID) }

// SaveTopUpMethod records the method top-ups of agentID charge.
func (s *Store) SaveTopUpMethod(_ context.Context, agentID string, m topup.Method) (topup.TopUp, error) {
	if agentID == "" || m.Customer == "" || m.PaymentMethod == "" {
		return topup.TopUp{}, store.Errorf(store.CodeInvalid, "method: an agent, a customer and a payment method are required")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ensureAccount(agentID)
	t := s.topUp(agentID)
	t.Method, t.UpdatedAt = &m, s.clock()
	return t.Clone(), nil
}

// PutTopUp sets the settings of agentID and enables top-up.
func (s *Store) PutTopUp(_ context.Context, agentID string, set topup.Settings) (topup.TopUp, error) {
	if err := set.Validate(); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInvalid, err, "top-up")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topUp(agentID)
	if t == nil {
		return topup.TopUp{}, noAccount(agentID)
	}
	next := t.Clone()
	if err := topup.Set(&next, set.Clone(), s.clock()); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeConflict, err, "top-up of %q", agentID)
	}
	*t = next
	return t.Clone(), nil
}

// GetTopUp returns the top-up of agentID.
func (s *Store) GetTopUp(_ context.Context, agentID string) (topup.TopUp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topUp(agentID)
	if t == nil {
		return topup.TopUp{}, noAccount(agentID)
	}
	return t.Clone(), nil
}

// DisableTopUp disables top-up of agentID.
func (s *Store) DisableTopUp(_ context.Context, agentID, reason string) (topup.TopUp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topUp(agentID)
	if t == nil {
		return topup.TopUp{}, noAccount(agentID)
	}
	if t.Enabled {
		topup.Disable(t, reason, s.clock())
	}
	return t.Clone(), nil
}

// BeginTopUp begins top-up expectSeq+1 of agentID.
func (s *Store) BeginTopUp(_ context.Context, agentID string, expectSeq int64) (payment.Payment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topUp(agentID)
	if t == nil {
		return payment.Payment{}, noAccount(agentID)
	}
	next := t.Clone()
	p, failure, berr := topup.Begin(&next, expectSeq, s.payments[t.PendingPaymentID], s.clock())
	var evs []event.Event
	if failure != nil {
		var err error
		if evs, err = s.newEvents(pending(event.TopUpFailed, agentID, failure)); err != nil {
			return payment.Payment{}, err
		}
	}
	var created store.CreatePaymentResult
	if berr == nil {
		var err error
		created, err = s.createPayment(p)
		if err == nil && !created.Created {
			err = store.Errorf(store.CodeInternal, "top-up payment %s exists already", p.ID)
		}
		if err != nil {
			return payment.Payment{}, err
		}
	}
	*t = next
	s.events.add(evs...)
	if berr != nil {
		return payment.Payment{}, store.Wrap(store.CodeConflict, berr, "top-up of %q", agentID)
	}
	return created.Payment, nil
}

// SettleTopUp ends the pending top-up of agentID if its payment ended.
func (s *Store) SettleTopUp(_ context.Context, agentID string) (topup.TopUp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topUp(agentID)
	if t == nil {
		return topup.TopUp{}, noAccount(agentID)
	}
	next := t.Clone()
	failure, changed := topup.Settle(&next, s.payments[t.PendingPaymentID], s.clock())
	if !changed {
		return t.Clone(), nil
	}
	if failure != nil {
		evs, err := s.newEvents(pending(event.TopUpFailed, agentID, failure))
		if err != nil {
			return topup.TopUp{}, err
		}
		s.events.add(evs...)
	}
	*t = next
	return t.Clone(), nil
}

// ListTopUps lists the watched top-ups by agent ID.
func (s *Store) ListTopUps(_ context.Context, p store.Page) ([]topup.TopUp, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*topup.TopUp
	for _, t := range s.topups {
		if t.Watched() {
			rows = append(rows, t)
		}
	}
	// By agent ID alone: every row has the same instant (one a cursor keeps).
	pos := func(t *topup.TopUp) position { return position{at: time.Unix(0, 0).UTC(), id: t.AgentID} }
	page, next, err := pageOf(rows, p, listID("topups"), pos)
	if err != nil {
		return nil, "", err
	}
	out := make([]topup.TopUp, len(page))
	for i, t := range page {
		out[i] = t.Clone()
	}
	return out, next, nil
}
