package memory

import (
	"slices"
	"sort"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/cursor"
)

// position is where a row stands in its list (cursor.Position): its sort
// instant, then its ID. Cursors are package cursor's, as PostgreSQL's are.
type position = cursor.Position

// listID is the identity of a list inside its cursors (cursor.List).
var listID = cursor.List

// paginate returns the page p of rows, which are sorted by key, keeping the
// rows keep accepts (nil keeps all) and converting them with conv. The next
// cursor is "" when no row is left.
func paginate[T, R any](rows []T, p store.Page, list string, key func(T) position, keep func(T) bool, conv func(T) R) ([]R, string, error) {
	start, ok, err := cursor.Decode(p.Cursor, list)
	if err != nil {
		return nil, "", err
	}
	i := 0
	if ok {
		i = sort.Search(len(rows), func(i int) bool { return start.Before(key(rows[i])) })
	}
	size := p.Size()
	items := make([]R, 0, min(size, len(rows)-i))
	var last position
	for ; i < len(rows); i++ {
		r := rows[i]
		if keep != nil && !keep(r) {
			continue
		}
		if len(items) == size {
			return items, cursor.Encode(list, last), nil
		}
		items = append(items, conv(r))
		last = key(r)
	}
	return items, "", nil
}

// insertSorted adds r to rows, which are sorted by their position pos,
// keeping the order. Rows mostly arrive in order, so it searches from the end.
func insertSorted[T any](rows []T, r T, pos func(T) position) []T {
	i := len(rows)
	for i > 0 && pos(r).Before(pos(rows[i-1])) {
		i--
	}
	return slices.Insert(rows, i, r)
}

// pageOf sorts rows, gathered unordered, by their list position and returns
// the page p of list, each row converted with conv.
func pageOf[T, R any](rows []T, p store.Page, list string, pos func(T) position, conv func(T) R) ([]R, string, error) {
	slices.SortFunc(rows, func(a, b T) int {
		switch pa, pb := pos(a), pos(b); {
		case pa.Before(pb):
			return -1
		case pb.Before(pa):
			return 1
		}
		return 0
	})
	return paginate(rows, p, list, pos, nil, conv)
}
