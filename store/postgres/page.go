package postgres

import (
	"context"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/cursor"
)

// listQuery is one list the store pages through: rows of from (a SELECT
// with its WHERE clause, using args), ordered by order and then id, which
// an index covers. name and parts identify the list and its filter
// (cursor.List), so a cursor of one list is refused by another.
type listQuery struct {
	name  string
	from  string
	args  []any
	order string
	parts []string
}

// where adds the condition "column op ($n)" to q, $n being arg.
func (q *listQuery) where(column, op string, arg any) {
	q.args = append(q.args, arg)
	q.from += " AND " + column + " " + op + " ($" + strconv.Itoa(len(q.args)) + ")"
}

// list returns the page p of q, scanning each row with scan; pos gives an
// item's order value and ID for the next cursor, "" on the last page.
func list[T any](ctx context.Context, db querier, q listQuery, p store.Page, scan func(pgx.Row) (T, error), pos func(*T) (time.Time, string)) ([]T, string, error) {
	size, key := p.Size(), cursor.List(q.name, q.parts...)
	sql, args := q.from, q.args
	after, ok, err := cursor.Decode(p.Cursor, key)
	if err != nil {
		return nil, "", err
	}
	if ok {
		n := len(args)
		sql += " AND (" + q.order + ", id) > ($" + strconv.Itoa(n+1) + ", $" + strconv.Itoa(n+2) + ")"
		args = append(args[:n:n], after.At, after.ID)
	}
	sql += " ORDER BY " + q.order + ", id LIMIT " + strconv.Itoa(size+1)
	rows, err := db.Query(ctx, sql, args...)
	if err != nil {
		return nil, "", pgfault.Read(err, "list %s", q.name)
	}
	items, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (T, error) { return scan(r) })
	if err != nil {
		return nil, "", pgfault.Read(err, "list %s", q.name)
	}
	if len(items) <= size {
		return items, "", nil
	}
	items = items[:size]
	at, id := pos(&items[size-1])
	return items, cursor.Encode(key, cursor.Position{At: at, ID: id}), nil
}
