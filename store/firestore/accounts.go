package firestore

import (
	"context"
	"maps"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
)

// UpsertAccount implements store.EntitlementStore.
func (s *Store) UpsertAccount(ctx context.Context, a entitlement.Account) (entitlement.Account, error) {
	if a.AgentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	ref := s.col(colAccounts).Doc(docID(a.AgentID))
	var out entitlement.Account
	err := s.run(ctx, "upsert account", func(ctx context.Context, tx *firestore.Transaction) error {
		now := s.clock()
		snap, err := tx.Get(ref)
		switch {
		case isNotFound(err):
			out = entitlement.Account{AgentID: a.AgentID, DisplayName: a.DisplayName, Metadata: maps.Clone(a.Metadata), CreatedAt: now, UpdatedAt: now}
			return tx.Create(ref, accountDoc(&out))
		case err != nil:
			return err
		}
		if out, err = accountFrom(snap); err != nil {
			return err
		}
		out.DisplayName, out.Metadata, out.UpdatedAt = a.DisplayName, maps.Clone(a.Metadata), now
		return tx.Set(ref, accountDoc(&out))
	})
	if err != nil {
		return entitlement.Account{}, err
	}
	return out, nil
}

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
