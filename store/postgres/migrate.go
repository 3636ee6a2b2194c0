package postgres

import (
	"context"
	"embed"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the store's schema history: the embedded SQL migrations and
// the table goose records them in (stipend_store_migrations, in the
// migrated schema).
var Migrations = pgmigrate.Set{Name: "store", FS: sub(migrationFiles, "migrations"), Table: "stipend_store_migrations"}

func sub(fsys fs.FS, dir string) fs.FS {
	f, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return f
}

// Migrate brings the schema of pool's connections up to date and returns the
// migrations it applied. Instances starting together migrate once; the
// others wait for it.
func Migrate(ctx context.Context, pool *pgxpool.Pool) ([]pgmigrate.Applied, error) {
	applied, err := pgmigrate.Up(ctx, pool, Migrations)
	if err != nil {
		return nil, store.Wrap(store.CodeUnavailable, err, "migrate the PostgreSQL store")
	}
	return applied, nil
}

// CheckSchema reports, without changing anything, whether the schema of
// pool's connections has every migration of this binary: an Internal error
// names how many are missing (run `stipend migrate`).
func CheckSchema(ctx context.Context, pool *pgxpool.Pool) error {
	pending, _, err := pgmigrate.Pending(ctx, pool, Migrations)
	if err != nil {
		return store.Wrap(store.CodeUnavailable, err, "read the PostgreSQL store's schema version")
	}
	if pending > 0 {
		return store.Errorf(store.CodeInternal, "the PostgreSQL store's schema lacks %d migration(s) of this binary: run stipend migrate", pending)
	}
	return nil
}
