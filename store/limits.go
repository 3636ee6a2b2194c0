package store

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
)

// EntitlementUpdater changes the spend controls after a grant: what an
// admin may change on an entitlement (spend controls, low-balance alerts,
// metadata, expiry) and nothing else, and an account's account-wide limits.
//
// Account-wide limits (entitlement.AccountLimits) bound every call of the
// agent: CheckAndConsume, Check and Authorize answer a call they refuse
// with Denied and one max_per_call_exceeded denial without an entitlement
// ID, before any entitlement is tried (after the replay check: a used key
// still replays). They are read beside the key lookup, outside the
// transaction of the charge: a call that overlaps a change of them may be
// judged by either version.
type EntitlementUpdater interface {
	// UpdateEntitlement applies u to the entitlement id at the store's now
	// (entitlement.Entitlement.Apply has the rules: the spend of the
	// current period is kept while its period stays the same, new alerts
	// start armed or, when the balance is already at or below them,
	// triggered) in ONE atomic step with the charges of the entitlement,
	// and returns it as it is after the change. It writes no event. Errors:
	// ErrNotFound if absent; Invalid (a *field.Error inside, naming the
	// field) for a change Apply refuses, which changes nothing. Applying
	// the same update twice leaves the entitlement as once, so retrying is
	// safe; while calls charge the entitlement it may answer Unavailable
	// under contention, as RevokeEntitlement does.
	UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error)
	// SetAccountLimits replaces the account-wide limits of agentID's
	// account, creating the account if absent (as UpsertAccount does), in
	// ONE atomic step, and returns the account. Invalid (a *field.Error
	// inside) for limits that fail their Validate. It is idempotent.
	SetAccountLimits(ctx context.Context, agentID string, l entitlement.AccountLimits) (entitlement.Account, error)
}
