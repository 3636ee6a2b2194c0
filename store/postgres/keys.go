package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

// querier is what reads need of a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// keyPair is one (agent, idempotency key): what charge_keys guards.
type keyPair struct{ agent, key string }

// usedKeys returns what each of pairs was used for (charge.Used), leaving
// out the unused ones, with every hold shown as at now. Unused keys cost one
// query; used ones one more for their consumptions and holds.
func usedKeys(ctx context.Context, q querier, pairs []keyPair, now time.Time) (map[keyPair]charge.Used, error) {
	if len(pairs) == 0 {
		return nil, nil
	}
	sql, args := keyRefsQuery(pairs)
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	refs, err := scanKeyRefs(rows)
	if err != nil {
		return nil, err
	}
	return resolveKeys(ctx, q, refs, now)
}

// keyRef is what charge_keys says a used key names.
type keyRef struct{ consumption, hold *string }

// keyRefsQuery is the query of the charge_keys rows of pairs: one index
// lookup per pair (a join of the pairs' arrays with the table may be
// planned as a scan of the whole table).
func keyRefsQuery(pairs []keyPair) (string, []any) {
	if len(pairs) == 1 {
		return `SELECT agent_id, idempotency_key, consumption_id, hold_id FROM charge_keys
			WHERE agent_id = $1 AND idempotency_key = $2`, []any{pairs[0].agent, pairs[0].key}
	}
	agents, keys := make([]string, len(pairs)), make([]string, len(pairs))
	for i, p := range pairs {
		agents[i], keys[i] = p.agent, p.key
	}
	return `SELECT k.agent_id, k.idempotency_key, k.consumption_id, k.hold_id
		FROM unnest($1::text[], $2::text[]) AS p (agent_id, idempotency_key)
		CROSS JOIN LATERAL (SELECT * FROM charge_keys c
			WHERE c.agent_id = p.agent_id AND c.idempotency_key = p.idempotency_key) k`, []any{agents, keys}
}

// scanKeyRefs reads the rows of keyRefsQuery.
func scanKeyRefs(rows pgx.Rows) (map[keyPair]keyRef, error) {
	found := map[keyPair]keyRef{}
	for rows.Next() {
		var p keyPair
		var r keyRef
		if err := rows.Scan(&p.agent, &p.key, &r.consumption, &r.hold); err != nil {
			rows.Close()
			return nil, err
		}
		found[p] = r
	}
	return found, rows.Err()
}

// resolveKeys reads the consumptions and holds that refs name (nothing,
// without a query, when refs is empty) and returns what each key was used for.
func resolveKeys(ctx context.Context, q querier, found map[keyPair]keyRef, now time.Time) (map[keyPair]charge.Used, error) {
	if len(found) == 0 {
		return nil, nil
	}
	var consumptionIDs, holdIDs []string
	for _, r := range found {
		if r.consumption != nil {
			consumptionIDs = append(consumptionIDs, *r.consumption)
		}
		if r.hold != nil {
			holdIDs = append(holdIDs, *r.hold)
		}
	}
	holds, err := holdsByID(ctx, q, holdIDs)
	if err != nil {
		return nil, err
	}
	for _, h := range holds {
		if h.ConsumptionID != "" {
			consumptionIDs = append(consumptionIDs, h.ConsumptionID)
		}
	}
	consumptions, err := consumptionsByID(ctx, q, consumptionIDs)
	if err != nil {
		return nil, err
	}
	out := make(map[keyPair]charge.Used, len(found))
	for p, r := range found {
		var u charge.Used
		if r.hold != nil {
			u.Hold = holds[*r.hold]
			u.Hold.Refresh(now)
			u.Consumption = consumptions[u.Hold.ConsumptionID]
		} else {
			u.Consumption = consumptions[*r.consumption]
		}
		out[p] = u
	}
	return out, nil
}

// holdsByID reads holds by ID; absent IDs are left out.
func holdsByID(ctx context.Context, q querier, ids []string) (map[string]entitlement.Hold, error) {
	if len(ids) == 0 {
		return map[string]entitlement.Hold{}, nil
	}
	rows, err := q.Query(ctx, holdsByIDSQL, ids)
	if err != nil {
		return nil, err
	}
	return scanHolds(rows)
}

const holdsByIDSQL = `SELECT ` + holdColumns + ` FROM holds WHERE id = ANY($1)`

// scanHolds reads rows of holdColumns into a map by ID.
func scanHolds(rows pgx.Rows) (map[string]entitlement.Hold, error) {
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Hold, error) { return scanHold(r) })
	if err != nil {
		return nil, err
	}
	out := make(map[string]entitlement.Hold, len(list))
	for _, h := range list {
		out[h.ID] = h
	}
	return out, nil
}

// consumptionsByID reads consumptions by ID; absent IDs are left out.
func consumptionsByID(ctx context.Context, q querier, ids []string) (map[string]entitlement.Consumption, error) {
	out := make(map[string]entitlement.Consumption, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT `+consumptionColumns+` FROM consumptions WHERE id = ANY($1)`, ids)
	if err != nil {
		return nil, err
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Consumption, error) { return scanConsumption(r) })
	if err != nil {
		return nil, err
	}
	for _, c := range list {
		out[c.ID] = c
	}
	return out, nil
}

// insertKeySQL takes the guard of one (agent, key) for a consumption or a
// hold. It waits for a concurrent holder of the key and, if that one
// committed, fails with a unique violation, which fails the rest of the
// transaction's pipelined writes and its COMMIT (commit, batch.go).
const insertKeySQL = `INSERT INTO charge_keys (agent_id, idempotency_key, consumption_id, hold_id) VALUES ($1, $2, $3, $4)`
