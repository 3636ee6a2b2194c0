package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/internal/pgmigrate"
)

const migrateUsage = `Usage:
  stipend migrate [--status] [--postgres-url URL] [--postgres-password-file FILE]
      apply the embedded schema migrations of the PostgreSQL store and ledger to the database
      (in the schema the URL's search_path names); with --status, list them and apply nothing
The settings default to STIPEND_POSTGRES_URL, STIPEND_POSTGRES_PASSWORD_FILE and STIPEND_POSTGRES_PASSWORD, as for serve.
`

// migrateCmd runs `stipend migrate`: for operators who apply the schema by
// hand (and start serve with --postgres-migrate=false) or want to see it.
func migrateCmd(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	c, status, err := parseMigrateFlags(args, env)
	if err != nil {
		fmt.Fprintf(stderr, "stipend migrate: %v\n\n%s", err, migrateUsage)
		return 2
	}
	pool, err := openPostgres(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "stipend migrate: %v\n", err)
		return 1
	}
	defer pool.Close()
	for _, set := range postgresSets {
		if status {
			err = printMigrations(ctx, pool, set, stdout)
		} else {
			err = applyMigrations(ctx, pool, set, stdout)
		}
		if err != nil {
			fmt.Fprintf(stderr, "stipend migrate: %v\n", err)
			return 1
		}
	}
	return 0
}

// parseMigrateFlags reads the PostgreSQL settings: serve's, from env, with
// the flags winning.
func parseMigrateFlags(args []string, env map[string]string) (Config, bool, error) {
	c, err := readSettings(nil, env)
	if err != nil {
		return Config{}, false, err
	}
	fs := flag.NewFlagSet("stipend migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.PostgresURL, "postgres-url", c.PostgresURL, "")
	fs.StringVar(&c.PostgresPasswordFile, "postgres-password-file", c.PostgresPasswordFile, "")
	status := fs.Bool("status", false, "")
	if err := fs.Parse(args); err != nil {
		return Config{}, false, err
	}
	switch {
	case fs.NArg() > 0:
		return Config{}, false, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	case c.PostgresURL == "":
		return Config{}, false, errors.New("--postgres-url (or STIPEND_POSTGRES_URL) is required")
	case c.PostgresPasswordFile != "" && c.PostgresPassword != "":
		return Config{}, false, errors.New("--postgres-password-file and STIPEND_POSTGRES_PASSWORD: give the password one way")
	}
	c.PostgresMaxConns = 2
	return c, *status, nil
}

func applyMigrations(ctx context.Context, pool *pgxpool.Pool, set pgmigrate.Set, w io.Writer) error {
	applied, err := pgmigrate.Up(ctx, pool, set)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		fmt.Fprintf(w, "%s: up to date\n", set.Name)
	}
	for _, a := range applied {
		fmt.Fprintf(w, "%s: applied %s\n", set.Name, a.File)
	}
	return nil
}

func printMigrations(ctx context.Context, pool *pgxpool.Pool, set pgmigrate.Set, w io.Writer) error {
	_, all, err := pgmigrate.Pending(ctx, pool, set)
	if err != nil {
		return err
	}
	for _, s := range all {
		state := "pending"
		if s.Applied {
			state = "applied"
		}
		fmt.Fprintf(w, "%s: %-7s %s\n", set.Name, state, s.File)
	}
	return nil
}
