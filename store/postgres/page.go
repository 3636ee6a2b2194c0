package postgres

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
)

// listQuery is one list the store pages through: rows of from (a SELECT
// with its WHERE clause, using args), ordered by order and then id, which
// an index covers. name and parts identify the list and its filter, so a
// cursor of one list is refused by another.
type listQuery struct {
	name  string
	from  string
	args  []any
	order string
	parts []string
}

// key is the list's identity inside its cursors.
func (q *listQuery) key() string {
	h := sha256.New()
	h.Write([]byte(q.name))
	for _, p := range q.parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// cursor is the decoded form of a page cursor: the last item's order value
// and ID, and the list it belongs to. The next page starts strictly after
// that position, so rows added meanwhile neither repeat nor shift pages.
type cursor struct {
	List  string    `json:"l"`
	After time.Time `json:"t"`
	ID    string    `json:"d"`
}

// list returns the page p of q, scanning each row with scan; pos gives an
// item's order value and ID for the next cursor, "" on the last page.
func list[T any](ctx context.Context, db querier, q listQuery, p store.Page, scan func(pgx.Row) (T, error), pos func(*T) (time.Time, string)) ([]T, string, error) {
	size := p.Size()
	sql, args := q.from, q.args
	if p.Cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(p.Cursor)
		var c cursor
		if err == nil {
			err = json.Unmarshal(raw, &c)
		}
		if err != nil || c.List != q.key() || c.ID == "" {
			return nil, "", store.Errorf(store.CodeInvalid, "cursor: malformed, or not of this list")
		}
		n := len(args)
		sql += " AND (" + q.order + ", id) > ($" + strconv.Itoa(n+1) + ", $" + strconv.Itoa(n+2) + ")"
		args = append(args[:n:n], c.After, c.ID)
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
	after, id := pos(&items[size-1])
	b, _ := json.Marshal(cursor{List: q.key(), After: after, ID: id})
	return items, base64.RawURLEncoding.EncodeToString(b), nil
}
