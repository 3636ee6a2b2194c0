package firestore

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/fsfault"
)

// AccountLimits implements charge.Charger: a point read of the account
// through the shared read queue (reads.go), which charge.Consume issues
// beside the key lookup, so both usually go out in one GetAll. Charges
// never write the account, so the read contends with nothing.
func (s *Store) AccountLimits(ctx context.Context, agentID string) (entitlement.AccountLimits, error) {
	snap, err := s.get(ctx, s.col(colAccounts).Doc(docID(agentID)))
	if err != nil {
		return entitlement.AccountLimits{}, fsfault.Read(err, "account limits")
	}
	if !snap.Exists() {
		return entitlement.AccountLimits{}, nil
	}
	a, err := accountFrom(snap)
	return a.Limits, err
}
