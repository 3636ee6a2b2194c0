package ops

import (
	"context"
	"errors"
	"maps"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// UpsertAccount is store.EntitlementStore.UpsertAccount: an update that
// changes nothing leaves the account (and its UpdatedAt) as it was. The
// kind is set when the account is created and never changes: a zero kind
// keeps the stored one, another kind is a Conflict (an agent's kind is
// stored as the zero kind, so one state has one value).
func (o Shared) UpsertAccount(ctx context.Context, a entitlement.Account) (entitlement.Account, error) {
	if a.AgentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	if !a.Kind.Valid() {
		return entitlement.Account{}, store.Wrap(store.CodeInvalid, &field.Error{Field: "kind", Reason: "must be agent or wallet"}, "account")
	}
	kind := a.Kind
	if kind == entitlement.KindAgent {
		kind = ""
	}
	return o.changeAccount(ctx, "upsert account", a.AgentID, func(stored *entitlement.Account, created bool) (bool, error) {
		if created {
			stored.Kind = kind
		} else if a.Kind != "" && stored.Kind != kind {
			return false, store.Wrap(store.CodeConflict, &field.Error{Field: "kind", Reason: "cannot change: an account's kind is set when it is created"}, "account %q", a.AgentID)
		}
		if stored.DisplayName == a.DisplayName && maps.Equal(stored.Metadata, a.Metadata) && !stored.UpdatedAt.IsZero() {
			return false, nil
		}
		stored.DisplayName, stored.Metadata = a.DisplayName, maps.Clone(a.Metadata)
		return true, nil
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
	return o.changeAccount(ctx, "set account limits", agentID, func(a *entitlement.Account, _ bool) (bool, error) {
		if a.Limits = l.Clone(); a.Limits.IsZero() {
			a.Limits = entitlement.AccountLimits{}
		}
		return true, nil
	})
}

// changeAccount applies change to the account agentID, created if absent
// (change is told so), and stores it, updated now, when change says it
// changed; an error of change fails the unit.
func (o Shared) changeAccount(ctx context.Context, what, agentID string, change func(a *entitlement.Account, created bool) (bool, error)) (entitlement.Account, error) {
	var out entitlement.Account
	err := o.run(ctx, what, func(tx unit.Tx) error {
		a, err := tx.Account(agentID)
		now := tx.Now()
		created := errors.Is(err, store.ErrNotFound)
		if created {
			a, err = entitlement.Account{AgentID: agentID, CreatedAt: now}, nil
		}
		if err != nil {
			return err
		}
		changed, err := change(&a, created)
		if err != nil {
			return err
		}
		if changed {
			a.UpdatedAt = now
			tx.PutAccount(a)
		}
		out = a
		return nil
	})
	return out, err
}
