package firestore_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

type indexFile struct {
	Indexes []struct {
		CollectionGroup string `json:"collectionGroup"`
		QueryScope      string `json:"queryScope"`
		Fields          []struct {
			FieldPath string `json:"fieldPath"`
			Order     string `json:"order"`
		} `json:"fields"`
	} `json:"indexes"`
}

// TestQueries_HaveIndexes checks every query shape the adapter declares
// against firestore.indexes.json: a query with equality filters and an order
// needs a composite index of its equality fields (any order) followed by
// the order field, ascending. The emulator does not enforce indexes, so
// this test is what stops a query from shipping without one.
func TestQueries_HaveIndexes(t *testing.T) {
	raw, err := os.ReadFile("../../firestore.indexes.json")
	if err != nil {
		t.Fatal(err)
	}
	var file indexFile
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatalf("firestore.indexes.json: %v", err)
	}
	have := map[string]bool{}
	for _, ix := range file.Indexes {
		if ix.QueryScope != "COLLECTION" || len(ix.Fields) < 2 {
			continue
		}
		last := ix.Fields[len(ix.Fields)-1]
		var eq []string
		for _, f := range ix.Fields[:len(ix.Fields)-1] {
			if f.Order != "ASCENDING" {
				eq = nil
				break
			}
			eq = append(eq, f.FieldPath)
		}
		if eq != nil && last.Order == "ASCENDING" {
			have[shape(ix.CollectionGroup, eq, last.FieldPath)] = true
		}
	}
	for _, q := range fsstore.Queries {
		for _, eq := range variants(q) {
			if q.Order == "" || len(eq) == 0 {
				continue // single-field indexes serve it
			}
			if want := shape(q.Collection, eq, q.Order); !have[want] {
				t.Errorf("query %s with equality filters %v ordered by %s: no composite index (%s) in firestore.indexes.json", q.Name, eq, q.Order, want)
			}
		}
	}
}

// variants returns the equality fields of every shape of q: Equal plus each
// subset of Optional.
func variants(q fsstore.Query) [][]string {
	var out [][]string
	for mask := 0; mask < 1<<len(q.Optional); mask++ {
		eq := slices.Clone(q.Equal)
		for i, f := range q.Optional {
			if mask&(1<<i) != 0 {
				eq = append(eq, f)
			}
		}
		out = append(out, eq)
	}
	return out
}

func shape(collection string, eq []string, order string) string {
	eq = slices.Clone(eq)
	slices.Sort(eq)
	return collection + "(" + strings.Join(eq, ",") + ";" + order + ")"
}

func TestQueries_NamesAreUnique(t *testing.T) {
	seen := map[string]bool{}
	for _, q := range fsstore.Queries {
		if seen[q.Name] {
			t.Errorf("query name %q declared twice", q.Name)
		}
		seen[q.Name] = true
	}
}
