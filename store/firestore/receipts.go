package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// receipt reads the receipt id from src.
func (s *Store) receipt(src source, id string) (receipt.Signed, error) {
	return load(src, s.col(colReceipts).Doc(docID(id)), receiptFrom, store.Errorf(store.CodeNotFound, "receipt %q", id))
}

// GetReceipt implements store.EntitlementStore.
func (s *Store) GetReceipt(ctx context.Context, id string) (receipt.Signed, error) {
	return s.receipt(direct{ctx, "get receipt"}, id)
}

// ListReceipts implements store.EntitlementStore.
func (s *Store) ListReceipts(ctx context.Context, agentID string, p store.Page) ([]receipt.Signed, string, error) {
	q := s.build(qReceiptsByAgent, filter{"agentId", "==", agentID})
	return list(ctx, q, listKey(qReceiptsByAgent, agentID), qReceiptsByAgent.Order, p, receiptFrom)
}
