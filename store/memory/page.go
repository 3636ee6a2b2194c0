package memory

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// A cursor is the position of the last item of a page, its sort time and
// ID, and the list it belongs to (listID), base64url-encoded so callers
// treat it as opaque. The next page starts strictly after that position, so
// rows inserted meanwhile neither repeat nor shift the pages. A cursor of
// one list (another agent's, other filters) is refused by another, as the
// Firestore store refuses it.
type position struct {
	at time.Time
	id string
}

// listID names a list: its kind and what selects its rows.
func listID(parts ...string) string {
	h := sha256.New()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

func (p position) cursor(list string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(list + "|" + strconv.FormatInt(p.at.UnixNano(), 10) + "|" + p.id))
}

// parseCursor decodes a cursor of list; "" is the start of the list.
func parseCursor(c, list string) (pos position, ok bool, err error) {
	if c == "" {
		return position{}, false, nil
	}
	raw, derr := base64.RawURLEncoding.DecodeString(c)
	of, rest, _ := strings.Cut(string(raw), "|")
	nanos, id, found := strings.Cut(rest, "|")
	n, perr := strconv.ParseInt(nanos, 10, 64)
	if derr != nil || !found || perr != nil || id == "" || of != list {
		return position{}, false, store.Errorf(store.CodeInvalid, "cursor: malformed, or not of this list")
	}
	return position{at: time.Unix(0, n).UTC(), id: id}, true, nil
}

// before reports whether p sorts strictly before q.
func (p position) before(q position) bool {
	if c := p.at.Compare(q.at); c != 0 {
		return c < 0
	}
	return p.id < q.id
}

// paginate returns the page p of rows, which are sorted by key, keeping the
// rows keep accepts (nil keeps all) and converting them with conv. The next
// cursor is "" when no row is left.
func paginate[T, R any](rows []T, p store.Page, list string, key func(T) position, keep func(T) bool, conv func(T) R) ([]R, string, error) {
	start, ok, err := parseCursor(p.Cursor, list)
	if err != nil {
		return nil, "", err
	}
	i := 0
	if ok {
		i = sort.Search(len(rows), func(i int) bool { return start.before(key(rows[i])) })
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
			return items, last.cursor(list), nil
		}
		items = append(items, conv(r))
		last = key(r)
	}
	return items, "", nil
}

// insertSorted adds r to rows, which are sorted by before, keeping the
// order. Rows mostly arrive in order, so it searches from the end.
func insertSorted[T any](rows []T, r T, before func(a, b T) bool) []T {
	i := len(rows)
	for i > 0 && before(r, rows[i-1]) {
		i--
	}
	return slices.Insert(rows, i, r)
}

// byPosition orders rows by their list position.
func byPosition[T any](key func(T) position) func(a, b T) bool {
	return func(a, b T) bool { return key(a).before(key(b)) }
}

// pageOf sorts rows, gathered unordered, by their list position and returns
// the page p of list, each row converted with conv.
func pageOf[T, R any](rows []T, p store.Page, list string, pos func(T) position, conv func(T) R) ([]R, string, error) {
	slices.SortFunc(rows, func(a, b T) int {
		switch pa, pb := pos(a), pos(b); {
		case pa.before(pb):
			return -1
		case pb.before(pa):
			return 1
		}
		return 0
	})
	return paginate(rows, p, list, pos, nil, conv)
}
