package postgres

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
)

// UpdateEntitlement implements store.EntitlementUpdater
// (ops.UpdateEntitlement): the change is made under the entitlement's row
// lock, as every charge is.
func (s *Store) UpdateEntitlement(ctx context.Context, id string, u entitlement.Update) (entitlement.Entitlement, error) {
	return ops.UpdateEntitlement(ctx, s.unit, id, u)
}

// AccountLimits implements charge.Charger: one query, which charge.Consume
// runs beside the key lookup. Charges never write the account row.
func (s *Store) AccountLimits(ctx context.Context, agentID string) (entitlement.AccountLimits, error) {
	a, err := scanAccount(s.pool.QueryRow(ctx, `SELECT `+accountColumns+` FROM accounts WHERE agent_id = $1`, agentID))
	if errors.Is(err, pgx.ErrNoRows) {
		return entitlement.AccountLimits{}, nil
	}
	if err != nil {
		return entitlement.AccountLimits{}, pgfault.Read(err, "account limits")
	}
	return a.Limits, nil
}

// SetAccountLimits implements store.EntitlementUpdater: one upsert of the
// account row.
func (s *Store) SetAccountLimits(ctx context.Context, agentID string, l entitlement.AccountLimits) (entitlement.Account, error) {
	if agentID == "" {
		return entitlement.Account{}, store.Errorf(store.CodeInvalid, "agentId: is required")
	}
	if err := l.Validate(); err != nil {
		return entitlement.Account{}, store.Wrap(store.CodeInvalid, err, "account limits")
	}
	limits, err := jsonArg(l)
	if err != nil {
		return entitlement.Account{}, err
	}
	a, err := scanAccount(s.pool.QueryRow(ctx, `INSERT INTO accounts AS a (`+accountColumns+`)
		VALUES ($1, '', '{}', $2, $2, $3)
		ON CONFLICT (agent_id) DO UPDATE SET limits = EXCLUDED.limits, updated_at = EXCLUDED.updated_at
		RETURNING `+accountColumns, agentID, s.clock(), limits))
	if err != nil {
		return entitlement.Account{}, pgfault.Write(err, "set account limits")
	}
	return a, nil
}
