// Package pgmigrate applies the versioned SQL migrations that the PostgreSQL
// store and the PostgreSQL idempotency ledger embed in the binary, with
// pressly/goose (v3, its Provider API: no global state, one transaction per
// migration, an advisory lock so that instances starting together migrate
// once).
//
// Every migration runs in the schema the pool's connections use (their
// search_path: set it in the connection URL, for example
// options=-csearch_path%3Dstipend), and goose records what it applied in a
// table of that schema named by the caller, so the store and the ledger keep
// separate histories and may live in one database or in two.
package pgmigrate

import (
	"context"
	"fmt"
	"hash/fnv"
	"io/fs"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// Set is one history of migrations: the files of FS (NNNNN_name.sql, with
// goose's "-- +goose Up" and "-- +goose Down" sections) and the table goose
// records them in.
type Set struct {
	// Name says whose migrations these are, in errors ("store", "ledger").
	Name string
	FS   fs.FS
	// Table is goose's version table, in the migrated schema.
	Table string
}

// Embedded returns the Set named name whose migrations are the files of
// directory dir of fsys (the caller's embedded files), recorded in table.
// It panics when dir is not in fsys, a mistake of the caller's go:embed
// line that no run can mend.
func Embedded(name string, fsys fs.FS, dir, table string) Set {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(err)
	}
	return Set{Name: name, FS: sub, Table: table}
}

// Applied is one migration that Up applied.
type Applied struct {
	Version int64
	File    string
}

// Status is one migration's state in the database.
type Status struct {
	Version int64
	File    string
	// Applied is false for a migration not applied yet.
	Applied bool
}

// Up applies, in order, every migration of set not yet applied to the
// schema pool's connections use, and returns those it applied (none when
// the schema is current). Concurrent callers on one schema wait for each
// other: the lock is a PostgreSQL advisory lock named after the schema and
// the set, so deployments in other schemas never wait.
func Up(ctx context.Context, pool *pgxpool.Pool, set Set) ([]Applied, error) {
	p, closeDB, err := provider(ctx, pool, set)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	results, err := p.Up(ctx)
	if err != nil {
		return nil, fmt.Errorf("%s migrations: %w", set.Name, err)
	}
	out := make([]Applied, 0, len(results))
	for _, r := range results {
		out = append(out, Applied{Version: r.Source.Version, File: r.Source.Path})
	}
	return out, nil
}

// Pending returns how many migrations of set pool's schema lacks, and the
// state of every migration, oldest first.
func Pending(ctx context.Context, pool *pgxpool.Pool, set Set) (pending int, all []Status, err error) {
	p, closeDB, err := provider(ctx, pool, set)
	if err != nil {
		return 0, nil, err
	}
	defer closeDB()
	states, err := p.Status(ctx)
	if err != nil {
		return 0, nil, fmt.Errorf("%s migrations: %w", set.Name, err)
	}
	for _, s := range states {
		applied := s.State == goose.StateApplied
		if !applied {
			pending++
		}
		all = append(all, Status{Version: s.Source.Version, File: s.Source.Path, Applied: applied})
	}
	return pending, all, nil
}

// provider returns a goose provider on pool for set, and a function that
// releases what it holds (not the pool).
func provider(ctx context.Context, pool *pgxpool.Pool, set Set) (*goose.Provider, func(), error) {
	var schema string
	if err := pool.QueryRow(ctx, "SELECT current_schema()").Scan(&schema); err != nil {
		return nil, nil, fmt.Errorf("%s migrations: reading the current schema: %w", set.Name, err)
	}
	// The lock ID names the schema and the set: two deployments in one
	// database (other schemas) do not wait for each other.
	h := fnv.New64a()
	fmt.Fprintf(h, "stipend\x00%s\x00%s", schema, set.Table)
	// Wait up to five minutes, probing every second, for another instance
	// that migrates the same schema.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(int64(h.Sum64())), lock.WithLockTimeout(1, 300))
	if err != nil {
		return nil, nil, err
	}
	db := stdlib.OpenDBFromPool(pool)
	p, err := goose.NewProvider(goose.DialectPostgres, db, set.FS,
		goose.WithTableName(set.Table),
		goose.WithSessionLocker(locker),
		goose.WithDisableGlobalRegistry(true),
		goose.WithLogger(goose.NopLogger()),
	)
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("%s migrations: %w", set.Name, err)
	}
	return p, func() { _ = db.Close() }, nil
}
