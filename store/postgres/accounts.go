package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
)

const accountColumns = `agent_id, display_name, metadata, created_at, updated_at, limits, kind`

func scanAccount(rows pgx.Row) (entitlement.Account, error) {
	var a entitlement.Account
	var metadata, limits []byte
	var created, updated *time.Time
	var kind string
	if err := rows.Scan(&a.AgentID, &a.DisplayName, &metadata, &created, &updated, &limits, &kind); err != nil {
		return entitlement.Account{}, err
	}
	r := &row{table: "accounts", id: a.AgentID}
	a.Metadata = r.strings("metadata", metadata)
	a.Limits = r.accountLimits(limits)
	a.Kind = entitlement.AccountKind(r.oneOf("kind", kind, kind == "" || entitlement.AccountKind(kind) == entitlement.KindWallet))
	a.CreatedAt, a.UpdatedAt = r.required("created_at", created), r.required("updated_at", updated)
	return a, r.err
}

// CallerAccount implements charge.Charger: one query, which charge.Consume
// runs beside the key lookup. Charges never write the account row.
func (s *Store) CallerAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	a, err := one(ctx, s.pool, scanAccount, nil, `SELECT `+accountColumns+` FROM accounts WHERE agent_id = $1`, agentID)
	return a, pgfault.Read(err, "account") // no account: the zero account
}
