package store

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/usage"
)

// UsageReader reads what an agent has and what it used: the read side of
// spend controls. Both methods only read, and each answers one consistent
// snapshot of the store.
type UsageReader interface {
	// Balance totals the agent's usable entitlements now
	// (entitlement.BalanceOf: revoked and expired ones left out, pending
	// lazy quota resets shown as applied, holds not yet expired counted
	// as held). An agent with none, or unknown, has an empty balance,
	// never ErrNotFound.
	Balance(ctx context.Context, agentID string) (entitlement.Balance, error)
	// Usage answers one page of q's buckets in key order, exactly as
	// q.Aggregate over the account's consumptions would (those whose
	// agentId or walletId is q.AgentID: a wallet's are its members'
	// charges to it; uncaptured holds are no consumptions), with the
	// cursor of the next page ("" on the last). q is normalized first: a query that fails Normalize is
	// Invalid (a *field.Error inside); so is a cursor not of q.
	Usage(ctx context.Context, q usage.Query, p Page) (items []usage.Bucket, nextCursor string, err error)
}
