package ops

import (
	"context"
	"errors"
	"maps"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// UpsertAccount is store.EntitlementStore.UpsertAccount: an update that
// changes nothing leaves the account (and its UpdatedAt) as it was.
func (o Shared) UpsertAccount(ctx context.Context, a entitlement.Account) (entitlement.Account, error) {
	if a.AgentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	return o.changeAccount(ctx, "upsert account", a.AgentID, func(stored *entitlement.Account) bool {
		if stored.DisplayName == a.DisplayName && maps.Equal(stored.Metadata, a.Metadata) && !stored.UpdatedAt.IsZero() {
			return false
		}
		stored.DisplayName, stored.Metadata = a.DisplayName, maps.Clone(a.Metadata)
		return true
	})
}

// SetAccountLimits is store.EntitlementUpdater.SetAccountLimits.
func (o Shared) SetAccountLimits(ctx context.Context, agentID string, l entitlement.AccountLimits) (entitlement.Account, error) {
	if agentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	if err := l.Validate(); err != nil {
		return entitlement.Account{}, store.Wrap(store.CodeInvalid, err, "account limits")
	}
	return o.changeAccount(ctx, "set account limits", agentID, func(a *entitlement.Account) bool {
		if a.Limits = l.Clone(); a.Limits.IsZero() {
			a.Limits = entitlement.AccountLimits{}
		}
		return true
	})
}

// changeAccount applies change to the account agentID, created if absent,
// and stores it, updated now, when change says it changed.
func (o Shared) changeAccount(ctx context.Context, what, agentID string, change func(*entitlement.Account) bool) (entitlement.Account, error) {
	var out entitlement.Account
	err := o.run(ctx, what, func(tx unit.Tx) error {
		a, err := tx.Account(agentID)
		now := tx.Now()
		if errors.Is(err, store.ErrNotFound) {
			a, err = entitlement.Account{AgentID: agentID, CreatedAt: now}, nil
		}
		if err != nil {
			return err
		}
		if change(&a) {
			a.UpdatedAt = now
			tx.PutAccount(a)
		}
		out = a
		return nil
	})
	return out, err
}
