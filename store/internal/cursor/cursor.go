// Package cursor is the one encoding of the page cursors of the stores'
// lists: the position of a page's last item (its sort instant and ID) and
// the identity of its list, as base64url of a small JSON object, so callers
// treat it as opaque. The next page starts strictly after that position,
// so rows added meanwhile neither repeat nor shift pages, and a cursor of
// one list (another agent's, other filters) is refused by another.
package cursor

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// List is the identity of the list name whose rows parts select.
func List(name string, parts ...string) string {
	h := sha256.New()
	h.Write([]byte(name))
	for _, p := range parts {
		h.Write([]byte{0})
		h.Write([]byte(p))
	}
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// Position is where a row stands in its list: its sort instant, then ID.
type Position struct {
	At time.Time
	ID string
}

// Before reports whether p sorts strictly before q.
func (p Position) Before(q Position) bool {
	if c := p.At.Compare(q.At); c != 0 {
		return c < 0
	}
	return p.ID < q.ID
}

// wire is a cursor's JSON.
type wire struct {
	List  string    `json:"l"`
	After time.Time `json:"t"`
	ID    string    `json:"d"`
}

// Encode returns the cursor of the page of list that ended at p.
func Encode(list string, p Position) string {
	b, _ := json.Marshal(wire{List: list, After: p.At, ID: p.ID})
	return base64.RawURLEncoding.EncodeToString(b)
}

// Decode returns the position the cursor c of list names, with ok false
// for "" (the start of the list). A malformed cursor, or one of another
// list, is Invalid.
func Decode(c, list string) (p Position, ok bool, err error) {
	if c == "" {
		return Position{}, false, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	var w wire
	if err == nil {
		err = json.Unmarshal(raw, &w)
	}
	if err != nil || w.List != list || w.ID == "" {
		return Position{}, false, store.Errorf(store.CodeInvalid, "cursor: malformed, or not of this list")
	}
	return Position{At: w.After, ID: w.ID}, true, nil
}
