package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// Balance implements store.UsageReader: one statement reads the agent's
// (or wallet's) own active entitlements, so the totals are of one snapshot.
func (s *Store) Balance(ctx context.Context, agentID string) (entitlement.Balance, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+entitlementColumns+` FROM entitlements
		WHERE agent_id = $1 AND status = 'active'`, agentID)
	if err != nil {
		return entitlement.Balance{}, pgfault.Read(err, "balance")
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Entitlement, error) { return scanEntitlement(r) })
	if err != nil {
		return entitlement.Balance{}, pgfault.Read(err, "balance")
	}
	return entitlement.BalanceOf(agentID, es, s.clock()), nil
}

// usageKeys are the key columns of each grouping: the member, the service
// and tool (text, compared byte by byte as Firestore and Go compare them,
// whatever the database's collation) and the local wall-clock start of the
// hour or day (timestamp without time zone, as usage.Query.Wall reads it).
var usageKeys = map[usage.GroupBy]struct{ member, service, tool, wall string }{
	usage.ByTool:    {`''`, `service COLLATE "C"`, `tool COLLATE "C"`, `NULL::timestamp`},
	usage.ByService: {`''`, `service COLLATE "C"`, `''`, `NULL::timestamp`},
	usage.ByHour:    {`''`, `''`, `''`, `date_trunc('hour', occurred_at AT TIME ZONE $4)`},
	usage.ByDay:     {`''`, `''`, `''`, `date_trunc('day', occurred_at AT TIME ZONE $4)`},
	usage.ByMember:  {`agent_id COLLATE "C"`, `''`, `''`, `NULL::timestamp`},
}

// accountConsumptions is the relation of an account's consumptions (usage
// and ListConsumptions): those it made ($1 is their agent_id) and, for a
// wallet, its members' charges to it ($1 is their wallet_id), each side
// served by its index in (occurred_at, id) order; cols are the columns
// each side reads. An ID is an agent's or a wallet's, never both, so no
// consumption is in both.
func accountConsumptions(cols string) string {
	return `(SELECT ` + cols + ` FROM consumptions WHERE agent_id = $1
	UNION ALL SELECT ` + cols + ` FROM consumptions WHERE wallet_id = $1 AND wallet_id <> '') c`
}

// usageColumns are the columns a usage query reads.
const usageColumns = `agent_id, service, tool, occurred_at, entitlement_type, units, refund_units, cost_cents, refund_cost_cents, cost_currency`

// Usage implements store.UsageReader with one statement (one snapshot): a
// GROUP BY of the account's consumptions in the range per key and currency,
// folded into one row per key, after the cursor's key, limit+1 keys.
func (s *Store) Usage(ctx context.Context, q usage.Query, p store.Page) ([]usage.Bucket, string, error) {
	if err := q.Normalize(); err != nil {
		return nil, "", store.Wrap(store.CodeInvalid, err, "usage query")
	}
	after, ok, err := q.After(p.Cursor)
	if err != nil {
		return nil, "", store.Wrap(store.CodeInvalid, err, "usage cursor")
	}
	k := usageKeys[q.GroupBy]
	// $4, the time zone, is named in every statement (the groupings by
	// name do not read it) so the cursor's parameters are numbered alike.
	args := []any{q.AgentID, q.From, q.To, q.Location.String()}
	where := ""
	if ok {
		args = append(args, after.Member, after.Service, after.Tool, after.Wall)
		where = fmt.Sprintf(` AND (%s, %s, %s, %s) > ($5::text, $6::text, $7::text, $8::timestamp)`, k.member, k.service, k.tool, k.wall)
		if !q.GroupBy.ByTime() {
			// NULL never compares greater: leave the wall out.
			where = fmt.Sprintf(` AND (%s, %s, %s) > ($5::text, $6::text, $7::text)`, k.member, k.service, k.tool)
			args = args[:7]
		}
	}
	args = append(args, p.Size()+1)
	sql := fmt.Sprintf(`WITH per AS (
	SELECT %[1]s AS k_member, %[2]s AS k_service, %[3]s AS k_tool, %[4]s AS k_wall, cost_currency, count(*) AS n,
		sum(units - coalesce(refund_units, 0)) FILTER (WHERE entitlement_type = 'quota') AS units,
		sum(cost_cents - coalesce(refund_cost_cents, 0)) AS cents
	FROM %[7]s
	WHERE occurred_at >= $2 AND occurred_at < $3 AND $4::text IS NOT NULL%[5]s
	GROUP BY 1, 2, 3, 4, cost_currency
)
SELECT k_member, k_service, k_tool, k_wall, sum(n)::bigint, coalesce(sum(units), 0)::bigint,
	jsonb_object_agg(cost_currency, cents::bigint) FILTER (WHERE cost_currency <> '')
FROM per GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4 LIMIT $%[6]d`, k.member, k.service, k.tool, k.wall, where, len(args), accountConsumptions(usageColumns))
	rows, err := s.pool.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", pgfault.Read(err, "usage")
	}
	var keys []usage.Key
	// The cents per currency come as a jsonb object (NULL: none), which
	// pgx decodes into the map.
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (usage.Bucket, error) {
		var key usage.Key
		var wall *time.Time
		var t usage.Tally
		if err := r.Scan(&key.Member, &key.Service, &key.Tool, &wall, &t.Count, &t.Units, &t.Cents); err != nil {
			return usage.Bucket{}, err
		}
		key.Wall = instant(wall)
		keys = append(keys, key)
		return q.Bucket(key, t), nil
	})
	if err != nil {
		return nil, "", pgfault.Read(err, "usage")
	}
	if len(items) <= p.Size() {
		return items, "", nil
	}
	return items[:p.Size()], q.Cursor(keys[p.Size()-1]), nil
}
