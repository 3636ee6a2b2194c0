package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/idempotency/pgledger"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	pgstore "github.com/stipend-mcp/stipend/store/postgres"
)

// migrateTimeout bounds the migrations at start, including the wait for
// another instance that is applying them.
const migrateTimeout = 5 * time.Minute

// openPostgres opens a connection pool on c's PostgreSQL database. It is
// the one way stipend opens PostgreSQL: serve opens one pool for its store
// and ledger, `stipend migrate` and `stipend ledger` one for their work.
// Connections are made on demand, so a server that is down does not stop
// the process here (/readyz reports it).
//
// The password comes from c.PostgresPasswordFile or c.PostgresPassword,
// else from the URL or, as libpq does, from PGPASSWORD or ~/.pgpass (pgx
// reads the PG* variables itself). Errors and logs never show it.
func openPostgres(ctx context.Context, c Config) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(c.PostgresURL)
	if err != nil {
		return nil, fmt.Errorf("--postgres-url: %w", err) // pgx redacts the password
	}
	switch {
	case c.PostgresPasswordFile != "":
		pw, err := readPassword(c.PostgresPasswordFile)
		if err != nil {
			return nil, err
		}
		cfg.ConnConfig.Password = pw
	case c.PostgresPassword != "":
		cfg.ConnConfig.Password = c.PostgresPassword
	}
	cfg.MaxConns = int32(c.PostgresMaxConns)
	pgstore.SessionTimeouts(cfg, c.PostgresLockTimeout, c.PostgresIdleTxTimeout)
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres pool: %w", err)
	}
	return pool, nil
}

// readPassword returns the first line of the file at path.
func readPassword(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--postgres-password-file: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return "", fmt.Errorf("--postgres-password-file %s: empty", path)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// postgresAttrs describes pool's database for logs: where, as whom, in
// which schema, never with the password.
func postgresAttrs(pool *pgxpool.Pool) []any {
	cc := pool.Config().ConnConfig
	schema := cc.RuntimeParams["search_path"]
	if schema == "" {
		schema = "(the role's search_path)"
	}
	return []any{"host", cc.Host, "port", cc.Port, "database", cc.Database, "user", cc.User,
		"schema", schema, "tls", cc.TLSConfig != nil, "maxConns", pool.Config().MaxConns}
}

// postgresSets are the migration histories a PostgreSQL deployment keeps:
// the store's tables and the ledger's.
var postgresSets = []pgmigrate.Set{pgstore.Migrations, pgledger.Migrations}

// prepareSchema makes sure pool's schema has every migration of this
// binary: it applies them when c.PostgresMigrate (instances starting
// together apply them once), and otherwise refuses a schema that lacks one.
func prepareSchema(ctx context.Context, c Config, pool *pgxpool.Pool, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, migrateTimeout)
	defer cancel()
	for _, set := range postgresSets {
		if !c.PostgresMigrate {
			pending, _, err := pgmigrate.Pending(ctx, pool, set)
			if err != nil {
				return err
			}
			if pending > 0 {
				return fmt.Errorf("the PostgreSQL schema lacks %d %s migration(s) of this binary and --postgres-migrate is false: run `stipend migrate`", pending, set.Name)
			}
			continue
		}
		applied, err := pgmigrate.Up(ctx, pool, set)
		if err != nil {
			return err
		}
		for _, a := range applied {
			logger.Info("postgres migration applied", "set", set.Name, "version", a.Version, "file", a.File)
		}
	}
	return nil
}
