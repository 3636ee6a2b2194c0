package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// The top-up of an account is the JSON document in accounts.topup
// (migration 00005); every change locks the account's row first, so the
// compare-and-set of BeginTopUp is the row lock plus the sequence check.

// decodeTopUp reads the topup column of agentID's row (NULL: never set).
func decodeTopUp(agentID string, raw []byte) (topup.TopUp, error) {
	t := topup.TopUp{AgentID: agentID}
	if raw == nil {
		return t, nil
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInternal, err, "account %q: corrupt topup", agentID)
	}
	t.AgentID = agentID
	return t, nil
}

// readTopUp reads the top-up of agentID on q, locking the account's row
// with lock (" FOR UPDATE", or "" in a view).
func readTopUp(ctx context.Context, q querier, agentID, lock string) (topup.TopUp, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT topup FROM accounts WHERE agent_id = $1`+lock, agentID).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return topup.TopUp{}, store.Errorf(store.CodeNotFound, "account %q", agentID)
	}
	if err != nil {
		return topup.TopUp{}, err
	}
	return decodeTopUp(agentID, raw)
}

// topUpRow is a listed top-up with its account's creation, the list order.
type topUpRow struct {
	t  topup.TopUp
	at time.Time
}

// ListTopUps implements store.TopUps, on the partial index
// accounts_topup_watched (by account creation, then agent ID).
func (s *Store) ListTopUps(ctx context.Context, p store.Page) ([]topup.TopUp, string, error) {
	q := listQuery{
		name:  "topups",
		from:  `SELECT id, topup, created_at FROM (SELECT agent_id AS id, topup, created_at FROM accounts WHERE topup_watched) a WHERE true`,
		order: "created_at",
	}
	scan := func(r pgx.Row) (topUpRow, error) {
		var row topUpRow
		var id string
		var raw []byte
		if err := r.Scan(&id, &raw, &row.at); err != nil {
			return row, err
		}
		var err error
		row.t, err = decodeTopUp(id, raw)
		return row, err
	}
	rows, next, err := list(ctx, s.pool, q, p, scan, func(r *topUpRow) (time.Time, string) { return r.at, r.t.AgentID })
	if err != nil {
		return nil, "", err
	}
	out := make([]topup.TopUp, len(rows))
	for i := range rows {
		out[i] = rows[i].t
	}
	return out, next, nil
}
