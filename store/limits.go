package store

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
)

// EntitlementUpdater changes an entitlement after its grant: what an admin
// may change (spend controls, low-balance alerts, metadata, expiry) and
// nothing else.
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
}
