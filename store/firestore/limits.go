package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// CallerAccount implements charge.Charger: a point read of the account
// through the shared read queue (reads.go), which charge.Consume issues
// beside the key lookup, so both usually go out in one GetAll. Charges
// never write the account, so the read contends with nothing.
func (s *Store) CallerAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	snap, err := s.get(ctx, s.col(colAccounts).Doc(docID(agentID)))
	if err != nil {
		return entitlement.Account{}, fsfault.Read(err, "caller account")
	}
	if !snap.Exists() {
		return entitlement.Account{}, nil
	}
	return accountFrom(snap)
}
