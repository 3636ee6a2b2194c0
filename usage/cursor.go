package usage

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// ErrCursor is the error of a cursor that is malformed or of another query.
var ErrCursor = errors.New("usage: malformed cursor, or one of another query")

// A cursor is the key of the last bucket of a page and the query it belongs
// to, base64url-encoded JSON that callers treat as opaque. Every store uses
// this one form, so the next page starts strictly after that key whatever
// the store does to find it.
type cursor struct {
	List    string    `json:"l"`
	Member  string    `json:"m,omitempty"`
	Service string    `json:"s,omitempty"`
	Tool    string    `json:"t,omitempty"`
	Wall    time.Time `json:"w,omitzero"`
}

// list identifies q's list of buckets: a cursor of one query is refused by another.
func (q *Query) list() string {
	h := sha256.New()
	for _, p := range []string{q.AgentID, q.From.Format(time.RFC3339Nano), q.To.Format(time.RFC3339Nano), string(q.GroupBy), q.Location.String()} {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Cursor returns the cursor of a page of q whose last bucket has key last.
func (q *Query) Cursor(last Key) string {
	c := cursor{List: q.list(), Member: last.Member, Service: last.Service, Tool: last.Tool, Wall: last.Wall}
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// After decodes a cursor of q: the key the next page starts after. ok is
// false for "", the first page; a cursor not made by q.Cursor is ErrCursor.
func (q *Query) After(s string) (after Key, ok bool, err error) {
	if s == "" {
		return Key{}, false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	var c cursor
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil || c.List != q.list() {
		return Key{}, false, ErrCursor
	}
	return Key{Member: c.Member, Service: c.Service, Tool: c.Tool, Wall: c.Wall.UTC()}, true, nil
}

// Page returns the page of size buckets of q after the cursor (keys and
// buckets in key order, as Aggregate returns them), and the cursor of the
// next page ("" on the last).
func (q *Query) Page(keys []Key, buckets []Bucket, cur string, size int) ([]Bucket, string, error) {
	after, ok, err := q.After(cur)
	if err != nil {
		return nil, "", err
	}
	i := 0
	if ok {
		for i < len(keys) && keys[i].Compare(after) <= 0 {
			i++
		}
	}
	end := min(i+size, len(keys))
	next := ""
	if end < len(keys) {
		next = q.Cursor(keys[end-1])
	}
	return buckets[i:end], next, nil
}
