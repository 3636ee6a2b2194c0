package webhook_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/event"
)

// TestDocs_EventData: docs/webhooks.md says, for every event type, which
// object its data holds (one table row per type).
func TestDocs_EventData(t *testing.T) {
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, typ := range event.Types {
		row := "| `" + string(typ) + "` |"
		i := strings.Index(string(doc), row)
		if i < 0 {
			t.Errorf("docs/webhooks.md has no row %q saying what its data holds", row)
			continue
		}
		line, _, _ := strings.Cut(string(doc[i:]), "\n")
		if !strings.Contains(line, "**") {
			t.Errorf("docs/webhooks.md row of %s names no object (in bold): %s", typ, line)
		}
	}
}
