package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// GetReceipt implements store.EntitlementStore.
func (s *Store) GetReceipt(ctx context.Context, id string) (receipt.Signed, error) {
	snap, err := s.col(colReceipts).Doc(docID(id)).Get(ctx)
	if err != nil {
		if isNotFound(err) {
			return receipt.Signed{}, store.Errorf(store.CodeNotFound, "receipt %q", id)
		}
		return receipt.Signed{}, fsfault.Read(err, "get receipt")
	}
	return receiptFrom(snap)
}

// ListReceipts implements store.EntitlementStore.
func (s *Store) ListReceipts(ctx context.Context, agentID string, p store.Page) ([]receipt.Signed, string, error) {
	q := s.build(qReceiptsByAgent, filter{"agentId", "==", agentID})
	return list(ctx, q, listKey(qReceiptsByAgent, agentID), qReceiptsByAgent.Order, p, receiptFrom)
}
