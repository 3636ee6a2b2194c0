package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
)

// GetAccount implements store.EntitlementStore.
func (s *Store) GetAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	snap, err := s.col(colAccounts).Doc(docID(agentID)).Get(ctx)
	if err != nil {
		if isNotFound(err) {
			return entitlement.Account{}, store.Errorf(store.CodeNotFound, "account %q", agentID)
		}
		return entitlement.Account{}, fsfault.Read(err, "get account")
	}
	return accountFrom(snap)
}

// ensureAccount reads the agent's account inside tx and returns a write that
// creates it when absent (nil otherwise). Transactions read everything before
// writing, so the caller applies the write after its other reads.
func (s *Store) ensureAccount(tx *firestore.Transaction, agentID string, now time.Time) (func() error, error) {
	ref := s.col(colAccounts).Doc(docID(agentID))
	_, err := tx.Get(ref)
	switch {
	case err == nil:
		return nil, nil
	case !isNotFound(err):
		return nil, err
	}
	return func() error {
		a := entitlement.Account{AgentID: agentID, CreatedAt: now, UpdatedAt: now}
		return tx.Create(ref, accountDoc(&a))
	}, nil
}
