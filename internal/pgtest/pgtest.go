// Package pgtest connects tests to the PostgreSQL server that scripts/test
// starts (initdb into a temporary directory, a server on a free loopback
// port, stopped afterwards) and names in STIPEND_TEST_POSTGRES_URL. Without
// it the PostgreSQL suites skip with a message, except under CI=true, where
// a missing server fails the test.
//
// Each caller of Schema gets a schema of its own, created empty and dropped
// when the test ends, so tests and subtests run in parallel on one server
// without seeing each other's rows.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/internal/testenv"
)

// EnvURL names the environment variable that holds the server's URL.
const EnvURL = "STIPEND_TEST_POSTGRES_URL"

var (
	once  sync.Once
	admin *pgxpool.Pool
	err   error
)

// URL returns the server's connection URL, or skips (fails under CI=true)
// tb when none is configured.
func URL(tb testing.TB) string {
	tb.Helper()
	return testenv.Service(tb, EnvURL, "the PostgreSQL suites")
}

// Schema creates an empty schema for tb, dropped when tb ends, and returns
// a pool configuration whose connections use it (their search_path).
func Schema(tb testing.TB) *pgxpool.Config {
	tb.Helper()
	cfg, err := pgxpool.ParseConfig(URL(tb))
	if err != nil {
		tb.Fatalf("pgtest: %v", err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = create(tb)
	return cfg
}

// SchemaURL is Schema as a connection URL (with search_path=SCHEMA), for
// programs that take one.
func SchemaURL(tb testing.TB) string {
	tb.Helper()
	u, err := url.Parse(URL(tb))
	if err != nil {
		tb.Fatalf("pgtest: %s is not a URL: %v", EnvURL, err)
	}
	q := u.Query()
	q.Set("search_path", create(tb))
	u.RawQuery = q.Encode()
	return u.String()
}

// create makes an empty schema for tb, dropped when tb ends, and returns
// its name.
func create(tb testing.TB) string {
	tb.Helper()
	dsn := URL(tb)
	once.Do(func() {
		cfg, perr := pgxpool.ParseConfig(dsn)
		if perr != nil {
			err = perr
			return
		}
		cfg.MaxConns = 4
		admin, err = pgxpool.NewWithConfig(context.Background(), cfg)
	})
	if err != nil {
		tb.Fatalf("pgtest: connecting to %s: %v", EnvURL, err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		tb.Fatalf("pgtest: create schema: %v", err)
	}
	tb.Cleanup(func() {
		// Registered before the caller opens its pools on the schema, so
		// it runs after they are closed (the last cleanup registered runs
		// first).
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			tb.Errorf("pgtest: drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// Open opens a pool of at most maxConns connections with cfg, closed when
// tb ends.
func Open(tb testing.TB, cfg *pgxpool.Config, maxConns int32) *pgxpool.Pool {
	tb.Helper()
	cfg = cfg.Copy()
	cfg.MaxConns = maxConns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatalf("pgtest: open pool: %v", err)
	}
	tb.Cleanup(pool.Close)
	return pool
}
