package memory

import (
	"context"

	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

func receiptPos(r *receipt.Signed) position { return position{At: r.IssuedAt, ID: r.ID} }

// putReceipt stores and indexes a new receipt. Callers hold s.mu.
func (s *Store) putReceipt(r *receipt.Signed) {
	s.receipts[r.ID] = r
	a := s.agent(r.AgentID)
	a.receipts = insertSorted(a.receipts, r, receiptPos)
}

// ListReceipts lists an agent's receipts, oldest first.
func (s *Store) ListReceipts(_ context.Context, agentID string, p store.Page) ([]receipt.Signed, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*receipt.Signed
	if a := s.agents[agentID]; a != nil {
		rows = a.receipts
	}
	return paginate(rows, p, listID("receipts", agentID), receiptPos, nil, (*receipt.Signed).Clone)
}
