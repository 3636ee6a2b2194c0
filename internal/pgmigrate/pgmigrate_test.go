package pgmigrate_test

import (
	"io/fs"
	"sync"
	"testing"

	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// set is the store's history: the largest one the binary embeds.
var set = postgres.Migrations

// migrationCount is how many migrations set holds.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(set.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	return len(files)
}

func TestUp_AppliesOnceThenNothing(t *testing.T) {
	pool := pgtest.Open(t, pgtest.Schema(t), 2)
	n := migrationCount(t)
	pending, all, err := pgmigrate.Pending(t.Context(), pool, set)
	if err != nil || pending != n || len(all) != n || all[0].Applied {
		t.Errorf("Pending on an empty schema = %d, %+v, %v; want all %d pending", pending, all, err, n)
	}
	applied, err := pgmigrate.Up(t.Context(), pool, set)
	if err != nil || len(applied) != n {
		t.Fatalf("Up on an empty schema = %+v, %v; want all %d migrations applied", applied, err, n)
	}
	again, err := pgmigrate.Up(t.Context(), pool, set)
	if err != nil || len(again) != 0 {
		t.Errorf("Up again = %+v, %v; want nothing applied", again, err)
	}
	pending, all, err = pgmigrate.Pending(t.Context(), pool, set)
	if err != nil || pending != 0 || !all[n-1].Applied {
		t.Errorf("Pending after Up = %d, %+v, %v; want none pending", pending, all, err)
	}
}

// TestUp_InstancesStartingTogether runs Up from several pools at once, as
// instances starting together do: the advisory lock lets one apply each
// migration, and every call succeeds.
func TestUp_InstancesStartingTogether(t *testing.T) {
	cfg := pgtest.Schema(t)
	const n = 4
	var wg sync.WaitGroup
	counts := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		pool := pgtest.Open(t, cfg, 2)
		wg.Go(func() {
			applied, err := pgmigrate.Up(t.Context(), pool, set)
			counts[i], errs[i] = len(applied), err
		})
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Up #%d: %v", i, errs[i])
		}
		total += counts[i]
	}
	if want := migrationCount(t); total != want {
		t.Errorf("%d concurrent Up calls applied %d migrations in all, want %d (each once)", n, total, want)
	}
}
