package main

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/internal/pgmigrate"
)

// migrateCmd runs `stipend migrate`: for operators who apply the schema by
// hand (and serve with --postgres-migrate=false) or want to see it. The
// PostgreSQL settings default to serve's STIPEND_* variables.
func migrateCmd(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	c, envErr := readPostgresSettings(env)
	fs := newFlagSet(cmdMigrate)
	for _, f := range []struct {
		p    *string
		name string
	}{{&c.PostgresURL, "postgres-url"}, {&c.PostgresPasswordFile, "postgres-password-file"}} {
		s := settingNamed(f.name)
		fs.StringVar(f.p, f.name, *f.p, s.help+" ("+s.env+")")
	}
	status := fs.Bool("status", false, "list every migration as applied or pending, and apply nothing")
	if code, ok := parseFlagsOnly(cmdMigrate, fs, args, stdout, stderr, envErr); !ok {
		return code
	}
	switch {
	case c.PostgresURL == "":
		return usageError(cmdMigrate, fs, stderr, errors.New("--postgres-url (or STIPEND_POSTGRES_URL) is required"))
	case c.PostgresPasswordFile != "" && c.PostgresPassword != "":
		return usageError(cmdMigrate, fs, stderr, errors.New("--postgres-password-file and STIPEND_POSTGRES_PASSWORD: give the password one way"))
	}
	pool, err := openPostgres(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "stipend migrate: %v\n", err)
		return 1
	}
	defer pool.Close()
	for _, set := range postgresSets {
		if *status {
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

// readPostgresSettings reads serve's settings from env for a command that
// only connects to PostgreSQL (two connections are enough).
func readPostgresSettings(env map[string]string) (Config, error) {
	c, _, err := readSettings(nil, env)
	c.PostgresMaxConns = 2
	return c, err
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
