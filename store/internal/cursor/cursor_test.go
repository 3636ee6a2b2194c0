package cursor_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/cursor"
)

func TestCursor(t *testing.T) {
	list := cursor.List("receipts", "agent-1")
	at := time.Date(2026, 3, 14, 9, 26, 53, 123456789, time.UTC)
	c := cursor.Encode(list, cursor.Position{At: at, ID: "r1"})
	got, ok, err := cursor.Decode(c, list)
	if err != nil || !ok || !got.At.Equal(at) || got.ID != "r1" {
		t.Fatalf("Decode(Encode) = %v, %v, %v; want the position at %v, r1", got, ok, err, at)
	}
	if _, ok, err := cursor.Decode("", list); ok || err != nil {
		t.Errorf(`Decode("") = %v, %v; want the start of the list`, ok, err)
	}
	for _, bad := range []string{"%%", "bm90IGpzb24", cursor.Encode(cursor.List("receipts", "agent-2"), cursor.Position{At: at, ID: "r1"}),
		cursor.Encode(list, cursor.Position{At: at})} {
		if _, _, err := cursor.Decode(bad, list); store.CodeOf(err) != store.CodeInvalid {
			t.Errorf("Decode(%q) = %v; want Invalid", bad, err)
		}
	}
	if cursor.List("a", "bc") == cursor.List("ab", "c") {
		t.Error(`List("a", "bc") == List("ab", "c")`)
	}
	if !(cursor.Position{At: at, ID: "a"}).Before(cursor.Position{At: at, ID: "b"}) || (cursor.Position{At: at.Add(1), ID: "a"}).Before(cursor.Position{At: at, ID: "b"}) {
		t.Error("Before does not order by instant, then ID")
	}
}
