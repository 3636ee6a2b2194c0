package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/internal/loadgen"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// postgresScenarios measures PostgreSQL in a schema of the bench's own:
// the bare baseline, the store with plain row locks and coalesced, several
// instances on one entitlement, and holds.
func postgresScenarios(ctx context.Context, c config, out io.Writer) ([]result, error) {
	cfg, pool, drop, err := benchSchema(ctx, c, out)
	if err != nil {
		return nil, err
	}
	defer drop()
	if _, err := pool.Exec(ctx, `CREATE TABLE bare (id text PRIMARY KEY, balance bigint NOT NULL)`); err != nil {
		return nil, err
	}

	var results []result
	for _, sh := range []struct{ callers, ents, calls int }{{1, 1, c.baseline}, {c.callers, 1, c.calls}, {c.callers, c.entitlements, c.calls}} {
		r, err := bare(ctx, c, pool, sh.callers, sh.ents, sh.calls)
		if err != nil {
			return nil, err
		}
		results = append(results, r)
	}
	rowLocks := postgresTarget(cfg, pathRowLocks, false, postgres.WithMaxBatch(1))
	coalesced := postgresTarget(cfg, pathCoalesced, false)
	for _, t := range []target{rowLocks, coalesced} {
		rs, err := storeScenarios(ctx, c, t)
		if err != nil {
			return nil, err
		}
		results = append(results, rs...)
	}
	if c.instances > 1 {
		for _, t := range []target{rowLocks, coalesced} {
			r, err := scenario(ctx, c, t, c.instances, c.callers, 1, c.calls)
			if err != nil {
				return nil, err
			}
			results = append(results, r)
		}
	}
	r, err := scenario(ctx, c, postgresTarget(cfg, pathHolds, true), 1, c.callers, 1, c.calls)
	if err != nil {
		return nil, err
	}
	return append(results, r), nil
}

// postgresTarget is the PostgreSQL store on cfg's schema; every instance
// gets a pool of its own, as a process of Stipend would.
func postgresTarget(cfg *pgxpool.Config, path string, holds bool, opts ...postgres.Option) target {
	return target{store: "postgres", path: path, holds: holds, open: func(n int) ([]store.EntitlementStore, func(), error) {
		var pools []*pgxpool.Pool
		release := func() {
			for _, p := range pools {
				p.Close()
			}
		}
		out := make([]store.EntitlementStore, n)
		for i := range out {
			p, err := pgxpool.NewWithConfig(context.Background(), cfg.Copy())
			if err != nil {
				release()
				return nil, nil, err
			}
			pools = append(pools, p)
			out[i] = postgres.New(p, opts...)
		}
		return out, release, nil
	}}
}

// bare is the baseline: each call one autocommitted UPDATE … RETURNING of
// a balance row, on the same server and pool size as the store, without
// the store's idempotency guard, consumption row or outbox: the least a
// debit on PostgreSQL costs.
func bare(ctx context.Context, c config, pool *pgxpool.Pool, callers, ents, calls int) (result, error) {
	initial := int64(calls*cost + 1000)
	ids := make([]string, ents)
	for i := range ids {
		ids[i] = uuid.NewString()
		if _, err := pool.Exec(ctx, `INSERT INTO bare (id, balance) VALUES ($1, $2)`, ids[i], initial); err != nil {
			return result{}, err
		}
	}
	r := result{store: "postgres", path: pathBare, callers: callers, ents: ents, want: calls}
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	l := loadgen.Drive(runCtx, callers, calls, func(ctx context.Context, i int) error {
		var left int64
		return pool.QueryRow(ctx, `UPDATE bare SET balance = balance - $2 WHERE id = $1 AND balance >= $2 RETURNING balance`,
			ids[i%ents], int64(cost)).Scan(&left)
	})
	r.ok, r.failed, r.wall, r.latencies, r.firstErr = l.OK, l.Failed, l.Wall, l.Latencies, l.FirstErr
	var charged int64
	if err := pool.QueryRow(ctx, `SELECT coalesce(sum($2 - balance), 0) FROM bare WHERE id = ANY($1)`, ids, initial).Scan(&charged); err != nil {
		return result{}, err
	}
	r.balance = "exact"
	if charged != int64(r.ok*cost) {
		r.balance = fmt.Sprintf("WRONG: charged %d for %d calls", charged, r.ok)
	}
	return r, nil
}

// benchSchema creates and migrates a schema of the bench's own on
// c.postgresURL and returns the pool configuration that uses it, a pool on
// it, and a function that closes the pool and drops the schema.
func benchSchema(ctx context.Context, c config, out io.Writer) (*pgxpool.Config, *pgxpool.Pool, func(), error) {
	admin, err := pgxpool.New(ctx, c.postgresURL)
	if err != nil {
		return nil, nil, nil, err
	}
	var version, settings string
	if err := admin.QueryRow(ctx, `SELECT current_setting('server_version'),
		'fsync=' || current_setting('fsync') || ' synchronous_commit=' || current_setting('synchronous_commit')`).Scan(&version, &settings); err != nil {
		admin.Close()
		return nil, nil, nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "stipend_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		admin.Close()
		return nil, nil, nil, err
	}
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE") // best effort at exit
		admin.Close()
	}
	cfg, err := pgxpool.ParseConfig(c.postgresURL)
	if err != nil {
		drop()
		return nil, nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema
	cfg.MaxConns = int32(c.maxConns)
	fmt.Fprintf(out, "PostgreSQL %s at %s:%d (%s), schema %s, pools of %d connections\n\n",
		version, cfg.ConnConfig.Host, cfg.ConnConfig.Port, settings, schema, c.maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, nil, err
	}
	if _, err := pgmigrate.Up(ctx, pool, postgres.Migrations); err != nil {
		pool.Close()
		drop()
		return nil, nil, nil, err
	}
	return cfg, pool, func() { pool.Close(); drop() }, nil
}
