package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// account reads the account agentID from src.
func (s *Store) account(src source, agentID string) (entitlement.Account, error) {
	return load(src, s.col(colAccounts).Doc(docID(agentID)), accountFrom, store.Errorf(store.CodeNotFound, "account %q", agentID))
}

// GetAccount implements store.EntitlementStore.
func (s *Store) GetAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	return s.account(direct{ctx, "get account"}, agentID)
}
