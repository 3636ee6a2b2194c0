package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
)

// UpdateEntitlement implements store.EntitlementUpdater: one transaction
// on the entitlement's document, as RevokeEntitlement's, so it is ordered
// with the batches that charge it; it gathers the entitlement's leases.
func (s *Store) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	ref := s.entitlementRef(id)
	var out entitlement.Entitlement
	err := s.run(ctx, "update entitlement", func(ctx context.Context, tx *firestore.Transaction) (err error) {
		var now time.Time
		if out, now, err = s.readEntitlement(tx, id); err != nil {
			return err
		}
		// New limits, alerts or expiry bound what leases may hold: fold
		// them all, so the change applies to every later charge and new
		// leases are sized under it (entitlement.LeaseSize).
		closeLeases, err := s.gatherAll(tx, &out)
		if err != nil {
			return err
		}
		if err := out.Apply(u, now); err != nil {
			return store.Wrap(store.CodeInvalid, err, "update of entitlement %q", id)
		}
		out.ExpiresAt = stampPtr(out.ExpiresAt)
		stampControls(&out)
		if err := closeLeases(); err != nil {
			return err
		}
		return tx.Set(ref, entitlementDoc(&out))
	})
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	out.Refresh(s.clock())
	return out, nil
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
