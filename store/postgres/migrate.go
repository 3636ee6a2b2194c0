package postgres

import (
	"embed"
	"io/fs"

	"github.com/stipend-mcp/stipend/internal/pgmigrate"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations is the store's schema history: the embedded SQL migrations and
// the table goose records them in (stipend_store_migrations, in the
// migrated schema). pgmigrate.Up applies them; `stipend migrate` and the
// start of `stipend serve` do.
var Migrations = pgmigrate.Set{Name: "store", FS: sub(migrationFiles, "migrations"), Table: "stipend_store_migrations"}

func sub(fsys fs.FS, dir string) fs.FS {
	f, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err) // the directory is embedded above
	}
	return f
}
