package postgres_test

import (
	"io/fs"
	"strings"
	"sync"
	"testing"

	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// migrationCount is how many migrations the binary embeds.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := fs.Glob(postgres.Migrations.FS, "*.sql")
	if err != nil || len(files) == 0 {
		t.Fatalf("embedded migrations: %v, %v", files, err)
	}
	return len(files)
}

func TestMigrate_AppliesOnceThenNothing(t *testing.T) {
	pool := pgtest.Open(t, pgtest.Schema(t), 2)
	err := postgres.CheckSchema(t.Context(), pool)
	if store.CodeOf(err) != store.CodeInternal || !strings.Contains(err.Error(), "stipend migrate") {
		t.Errorf("CheckSchema on an empty schema = %v, want an internal error that says to run stipend migrate", err)
	}
	applied, err := postgres.Migrate(t.Context(), pool)
	if err != nil || len(applied) != migrationCount(t) {
		t.Fatalf("Migrate on an empty schema = %v, %v; want all %d migrations applied", applied, err, migrationCount(t))
	}
	again, err := postgres.Migrate(t.Context(), pool)
	if err != nil || len(again) != 0 {
		t.Errorf("Migrate again = %v, %v; want nothing applied", again, err)
	}
	if err := postgres.CheckSchema(t.Context(), pool); err != nil {
		t.Errorf("CheckSchema after Migrate: %v", err)
	}
}

// TestMigrate_InstancesStartingTogether runs Migrate from several pools at
// once, as instances starting together do: the advisory lock lets one apply
// each migration, and every call succeeds.
func TestMigrate_InstancesStartingTogether(t *testing.T) {
	cfg := pgtest.Schema(t)
	const n = 4
	var wg sync.WaitGroup
	counts := make([]int, n)
	errs := make([]error, n)
	for i := range n {
		pool := pgtest.Open(t, cfg, 2)
		wg.Go(func() {
			applied, err := postgres.Migrate(t.Context(), pool)
			counts[i], errs[i] = len(applied), err
		})
	}
	wg.Wait()
	total := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Migrate #%d: %v", i, errs[i])
		}
		total += counts[i]
	}
	if want := migrationCount(t); total != want {
		t.Errorf("%d concurrent Migrate calls applied %d migrations in all, want %d (each once)", n, total, want)
	}
}
