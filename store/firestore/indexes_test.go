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
	FieldOverrides []struct {
		CollectionGroup string          `json:"collectionGroup"`
		FieldPath       string          `json:"fieldPath"`
		Indexes         []overrideIndex `json:"indexes"`
	} `json:"fieldOverrides"`
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
// its order fields (Order, Then, and an aggregation's Sum), ascending. The
// emulator does not enforce indexes, so this test is what stops a query
// from shipping without one.
func TestQueries_HaveIndexes(t *testing.T) {
	file := readJSON[indexFile](t, "firestore.indexes.json")
	for _, q := range fsstore.Queries {
		for _, eq := range variants(q) {
			tail := orderFields(q)
			if q.Order == "" || len(eq)+len(tail) < 2 {
				continue // single-field indexes serve it
			}
			if !hasIndex(file, q.Collection, eq, tail) {
				t.Errorf("query %s with equality filters %v ordered by %v: no composite index (%s) in firestore.indexes.json",
					q.Name, eq, tail, shape(q.Collection, eq, tail))
			}
		}
	}
}

// orderFields are the fields q's results are ordered by, before the document ID.
func orderFields(q fsstore.Query) []string {
	tail := slices.Concat([]string{q.Order}, q.Then)
	if q.Sum != "" {
		tail = append(tail, q.Sum)
	}
	return tail
}

// hasIndex reports whether file declares an ascending composite index on
// collection of the fields eq, in any order, followed by tail.
func hasIndex(file indexFile, collection string, eq, tail []string) bool {
	for _, ix := range file.Indexes {
		if ix.CollectionGroup != collection || ix.QueryScope != "COLLECTION" || len(ix.Fields) != len(eq)+len(tail) {
			continue
		}
		var got []string
		for _, f := range ix.Fields {
			if f.Order != "ASCENDING" {
				got = nil
				break
			}
			got = append(got, f.FieldPath)
		}
		if got != nil && shape(collection, got[:len(eq)], got[len(eq):]) == shape(collection, eq, tail) {
			return true
		}
	}
	return false
}

// TestQueries_FieldsStayIndexed: a field override replaces a field's
// automatic single-field indexes, so one on a field a query filters or
// orders on must keep the ascending index (ExpireHolds' range on
// holdsExpireAt has no composite index to fall back on). Overrides exist
// to exempt fields no query uses, such as an entitlement's holds, which
// every batch rewrites.
func TestQueries_FieldsStayIndexed(t *testing.T) {
	file := readJSON[indexFile](t, "firestore.indexes.json")
	for _, q := range fsstore.Queries {
		fields := slices.Concat(q.Equal, q.Optional, orderFields(q))
		for _, o := range file.FieldOverrides {
			if o.CollectionGroup != q.Collection || !slices.Contains(fields, o.FieldPath) {
				continue
			}
			if !slices.Contains(o.Indexes, overrideIndex{Order: "ASCENDING", QueryScope: "COLLECTION"}) {
				t.Errorf("query %s uses %s.%s, but a field override drops its ascending index", q.Name, q.Collection, o.FieldPath)
			}
		}
	}
}

// overrideIndex is one single-field index a field override keeps.
type overrideIndex struct {
	Order      string `json:"order"`
	QueryScope string `json:"queryScope"`
}

// readJSON decodes the repository's file path.
func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	raw, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
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

func shape(collection string, eq, order []string) string {
	eq = slices.Clone(eq)
	slices.Sort(eq)
	return collection + "(" + strings.Join(eq, ",") + ";" + strings.Join(order, ",") + ")"
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
