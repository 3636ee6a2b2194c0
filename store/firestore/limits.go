package firestore

import (
	"context"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// UpdateEntitlement implements store.EntitlementUpdater
// (ops.UpdateEntitlement): the unit's read of the entitlement gathers all
// its leases, so new limits, alerts or expiry apply to every later charge
// and new leases are sized under them (entitlement.LeaseSize).
func (s *Store) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	return ops.UpdateEntitlement(ctx, s.unit, id, u)
}

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

// SetAccountLimits implements store.EntitlementUpdater.
func (s *Store) SetAccountLimits(ctx context.Context, agentID string, l entitlement.AccountLimits) (entitlement.Account, error) {
	if agentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	if err := l.Validate(); err != nil {
		return entitlement.Account{}, store.Wrap(store.CodeInvalid, err, "account limits")
	}
	ref := s.col(colAccounts).Doc(docID(agentID))
	var out entitlement.Account
	err := s.run(ctx, "set account limits", func(ctx context.Context, tx *firestore.Transaction) error {
		snap, err := tx.Get(ref)
		now := s.clock()
		switch {
		case isNotFound(err):
			out = entitlement.Account{AgentID: agentID, CreatedAt: now}
		case err != nil:
			return err
		default:
			if out, err = accountFrom(snap); err != nil {
				return err
			}
		}
		out.Limits, out.UpdatedAt = l.Clone(), now
		return tx.Set(ref, accountDoc(&out))
	})
	if err != nil {
		return entitlement.Account{}, err
	}
	return out, nil
}

// chargeEvents writes the events of the charge cons, with the entitlement
// after it as data: entitlement.balance_low when it crossed an alert,
// entitlement.depleted when it emptied the entitlement.
func (b *batch) chargeEvents(cons *entitlement.Consumption, after *entitlement.Entitlement) error {
	if cons.LowBalance {
		if err := b.event(event.EntitlementBalanceLow, after); err != nil {
			return err
		}
	}
	if cons.Depleted() {
		return b.event(event.EntitlementDepleted, after)
	}
	return nil
}
