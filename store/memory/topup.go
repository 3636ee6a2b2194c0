package memory

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
	"github.com/stipend-mcp/stipend/topup"
)

func noAccount(agentID string) error { return store.Errorf(store.CodeNotFound, "account %q", agentID) }

// SaveTopUpMethod implements store.TopUps (ops.SaveTopUpMethod).
func (s *Store) SaveTopUpMethod(ctx context.Context, agentID string, m topup.Method) (topup.TopUp, error) {
	return ops.SaveTopUpMethod(ctx, s.unit, agentID, m)
}

// PutTopUp implements store.TopUps (ops.PutTopUp).
func (s *Store) PutTopUp(ctx context.Context, agentID string, set topup.Settings) (topup.TopUp, error) {
	return ops.PutTopUp(ctx, s.unit, agentID, set)
}

// GetTopUp returns the top-up of agentID.
func (s *Store) GetTopUp(_ context.Context, agentID string) (topup.TopUp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return (&tx{s: s}).TopUp(agentID)
}

// DisableTopUp implements store.TopUps (ops.DisableTopUp).
func (s *Store) DisableTopUp(ctx context.Context, agentID, reason string) (topup.TopUp, error) {
	return ops.DisableTopUp(ctx, s.unit, agentID, reason)
}

// BeginTopUp implements store.TopUps (ops.BeginTopUp).
func (s *Store) BeginTopUp(ctx context.Context, agentID string, expectSeq int64) (payment.Payment, error) {
	return ops.BeginTopUp(ctx, s.unit, agentID, expectSeq)
}

// SettleTopUp implements store.TopUps (ops.SettleTopUp).
func (s *Store) SettleTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	return ops.SettleTopUp(ctx, s.unit, agentID)
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
