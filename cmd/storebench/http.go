package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/loadgen"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// The HTTP comparison (-http): POST /v1/consume through Stipend's real API
// (api.New: auth, strict decoding, the access log and metrics) on the
// PostgreSQL store, against a reference server on the same database: an
// echo handler whose consume is one hand-written transaction (UPDATE …
// RETURNING of the agent's balance, INSERT of the consumption ON CONFLICT
// DO NOTHING, COMMIT) on a pool of the same size. Both listen on loopback
// in this process; the load generator too. Two scenarios: spread (every
// agent its own entitlement, calls go round the agents) and hot (one
// agent). Rounds alternate the order of the two servers; every run ends
// with a check that what the balances lost is what the stored
// consumptions charged and what was answered.

// httpServer is one of the two servers.
type httpServer struct {
	name string
	url  string
	// seed gives each of agents its balance; charged returns what the
	// agents' balances lost and what their stored consumptions charged.
	seed    func(ctx context.Context, agents []string, initial int64) error
	charged func(ctx context.Context, agents []string, initial int64) (lost, stored int64, err error)
}

// httpRun is one run of one server in one round.
type httpRun struct {
	load     loadgen.Load
	cpu, db  time.Duration // this process's CPU time; the PostgreSQL server's
	exact    string
	loadAvg  string
	parallel int
}

func (r *httpRun) rate() float64 { return float64(r.load.OK) / r.load.Wall.Seconds() }

// cpuPerCall is (process + database) CPU time per answered call.
func (r *httpRun) cpuPerCall() time.Duration {
	if r.load.OK == 0 {
		return 0
	}
	return (r.cpu + r.db) / time.Duration(r.load.OK)
}

func httpBench(ctx context.Context, c config, out io.Writer) error {
	cfg, pool, drop, err := benchSchema(ctx, c, out)
	if err != nil {
		return err
	}
	defer drop()
	dbCPU := postgresCPU(ctx, pool)
	if _, err := dbCPU(); err != nil {
		fmt.Fprintf(out, "PostgreSQL server CPU not counted: %v\n", err)
		dbCPU = func() (time.Duration, error) { return 0, nil }
	}
	st, stStop, err := stipendServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer stStop()
	ref, refStop, err := referenceServer(ctx, cfg)
	if err != nil {
		return err
	}
	defer refStop()
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * c.httpCallers, MaxIdleConnsPerHost: c.httpCallers, MaxConnsPerHost: c.httpCallers}}
	fmt.Fprintf(out, "POST /v1/consume over HTTP on 127.0.0.1: %d callers (keep-alive connections), %d calls per run, %d rounds alternating, pools of %d; CPU per call = this process (servers and load generator) + the PostgreSQL server's processes\n",
		c.httpCallers, c.httpCalls, c.httpRounds, c.maxConns)
	for _, sc := range []struct {
		name   string
		agents int
	}{{"spread", c.agents}, {"hot", 1}} {
		if sc.name == "hot" && !c.httpHot {
			continue
		}
		if err := httpScenario(ctx, c, out, client, dbCPU, sc.name, sc.agents, []*httpServer{st, ref}); err != nil {
			return err
		}
	}
	return nil
}

// httpScenario seeds agents agents on both servers and runs the rounds.
func httpScenario(ctx context.Context, c config, out io.Writer, client *http.Client, dbCPU func() (time.Duration, error), name string, agents int, servers []*httpServer) error {
	prefix := name + "-" + uuid.NewString()[:8] + "-"
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = prefix + strconv.Itoa(i)
	}
	initial := int64(c.httpRounds*c.httpCalls*cost + 1000)
	for _, s := range servers {
		if err := s.seed(ctx, ids, initial); err != nil {
			return fmt.Errorf("%s: seed: %w", s.name, err)
		}
	}
	fmt.Fprintf(out, "\n### %s: %d agents, each with one credits entitlement\n\n", name, agents)
	fmt.Fprintln(out, "| round | server | ok | failed | calls/s | p50 | p99 | CPU per call (process + database) | balances | load | Stipend ÷ reference |")
	fmt.Fprintln(out, "|---:|---|---:|---:|---:|---:|---:|---:|---|---|---:|")
	answered := make([]int64, len(servers))
	var ratios, cpuRatios []float64
	for r := range c.httpRounds {
		runs := make([]httpRun, len(servers))
		order := []int{0, 1}
		if r%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			s := servers[i]
			run, err := httpDrive(ctx, c, client, dbCPU, s.url, ids, fmt.Sprintf("%s%d-", prefix, r))
			if err != nil {
				return err
			}
			answered[i] += int64(run.load.OK)
			lost, stored, err := s.charged(ctx, ids, initial)
			if err != nil {
				return err
			}
			run.exact = "exact"
			if lost != stored || stored < answered[i]*cost || (run.load.Failed == 0 && stored != answered[i]*cost) {
				run.exact = fmt.Sprintf("WRONG: balances lost %d, consumptions %d, answered %d", lost, stored, answered[i]*cost)
			}
			runs[i] = run
		}
		ratio, cpuRatio := runs[0].rate()/runs[1].rate(), float64(runs[0].cpuPerCall())/float64(runs[1].cpuPerCall())
		ratios, cpuRatios = append(ratios, ratio), append(cpuRatios, cpuRatio)
		for i, s := range servers {
			x := ""
			if i == 0 {
				x = fmt.Sprintf("%.2f× (CPU per call %.2f×)", ratio, cpuRatio)
			}
			run := &runs[i]
			fmt.Fprintf(out, "| %d | %s | %d | %d | %.0f | %s | %s | %s (%s + %s) | %s | %s | %s |\n", r+1, s.name, run.load.OK, run.load.Failed,
				run.rate(), ms(percentile(run.load.Latencies, 0.5)), ms(percentile(run.load.Latencies, 0.99)),
				us(run.cpuPerCall()), us(run.cpu/time.Duration(max(run.load.OK, 1))), us(run.db/time.Duration(max(run.load.OK, 1))), run.exact, run.loadAvg, x)
			if run.load.FirstErr != "" {
				fmt.Fprintf(out, "|   | first error: %s |\n", truncate(run.load.FirstErr, 200))
			}
		}
	}
	fmt.Fprintf(out, "\n%s: Stipend ÷ reference, median of %d rounds: %.2f× calls/s, %.2f× CPU per call\n", name, len(ratios), median(ratios), median(cpuRatios))
	return nil
}

func us(d time.Duration) string { return fmt.Sprintf("%d µs", d.Microseconds()) }

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// httpDrive runs c.httpCalls consumes of 1 cent against url, call i for
// agent i mod len(agents) with key keyPrefix+i, and measures CPU time.
func httpDrive(ctx context.Context, c config, client *http.Client, dbCPU func() (time.Duration, error), url string, agents []string, keyPrefix string) (httpRun, error) {
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	cpus := func() (process, db time.Duration, err error) {
		if process, err = processCPU(); err == nil {
			db, err = dbCPU()
		}
		return process, db, err
	}
	cpu0, db0, err := cpus()
	if err != nil {
		return httpRun{}, err
	}
	load := loadgen.Drive(runCtx, c.httpCallers, c.httpCalls, func(ctx context.Context, i int) error {
		body := `{"agentId":"` + agents[i%len(agents)] + `","service":"bench","tool":"call","idempotencyKey":"` + keyPrefix + strconv.Itoa(i) +
			`","cost":{"cents":` + strconv.Itoa(cost) + `,"currency":"USD"}}`
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+benchKey)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Contains(b, []byte(`"consumed"`)) {
			return fmt.Errorf("HTTP %d: %s", resp.StatusCode, truncate(string(b), 200))
		}
		return nil
	})
	cpu1, db1, err := cpus()
	if err != nil {
		return httpRun{}, err
	}
	avg, _ := os.ReadFile("/proc/loadavg")
	return httpRun{load: load, cpu: cpu1 - cpu0, db: db1 - db0, loadAvg: strings.Join(strings.Fields(string(avg))[:1], "")}, nil
}

// benchKey is the host API key both servers are called with (the
// reference ignores it).
var benchKey string

// stipendServer serves Stipend's API (api.New, as `stipend serve` builds
// it, with the access log to io.Discard) on the PostgreSQL store on a pool
// of its own.
func stipendServer(ctx context.Context, cfg *pgxpool.Config) (*httpServer, func(), error) {
	raw, k, err := apikey.Generate("host", apikey.RoleHost, nil)
	if err != nil {
		return nil, nil, err
	}
	benchKey = raw
	keys, err := apikey.NewSet([]apikey.Key{k})
	if err != nil {
		return nil, nil, err
	}
	signer, err := receipt.NewEphemeralKeyring()
	if err != nil {
		return nil, nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, nil, err
	}
	st := postgres.New(pool)
	srv, err := api.New(api.Config{Store: st, Keys: keys, Signer: signer,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Registry: prometheus.NewRegistry()})
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	url, stop, err := serve(srv.Handler())
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	s := &httpServer{name: "Stipend", url: url,
		seed: func(ctx context.Context, agents []string, initial int64) error {
			for _, a := range agents {
				m := money.Money{Cents: initial, Currency: "USD"}
				if _, err := st.CreateEntitlement(ctx, entitlement.Entitlement{ID: uuid.NewString(), AgentID: a, Type: entitlement.TypeCredits,
					Scope: entitlement.Scope{Service: "bench"}, Credits: entitlement.Credits{Balance: m, Granted: m}}); err != nil {
					return err
				}
			}
			return nil
		},
		charged: func(ctx context.Context, agents []string, initial int64) (lost, stored int64, err error) {
			err = pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum($2 - balance_cents), 0) FROM entitlements WHERE agent_id = ANY($1)),
				(SELECT coalesce(sum(cost_cents), 0) FROM consumptions WHERE agent_id = ANY($1))`, agents, initial).Scan(&lost, &stored)
			return lost, stored, err
		},
	}
	return s, func() { stop(); _ = st.Close(); pool.Close() }, nil
}

// referenceServer is the bare-SQL reference: an echo handler that decodes
// the same JSON and charges in one transaction on a pool of its own.
func referenceServer(ctx context.Context, cfg *pgxpool.Config) (*httpServer, func(), error) {
	pool, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
	if err != nil {
		return nil, nil, err
	}
	if _, err := pool.Exec(ctx, `CREATE TABLE ref_balances (agent_id text PRIMARY KEY, cents bigint NOT NULL);
		CREATE TABLE ref_consumptions (agent_id text NOT NULL, idempotency_key text NOT NULL, id uuid NOT NULL,
			cents bigint NOT NULL, occurred_at timestamptz NOT NULL, PRIMARY KEY (agent_id, idempotency_key))`); err != nil {
		pool.Close()
		return nil, nil, err
	}
	type request struct {
		AgentID        string      `json:"agentId"`
		Service        string      `json:"service"`
		Tool           string      `json:"tool"`
		IdempotencyKey string      `json:"idempotencyKey"`
		Cost           money.Money `json:"cost"`
	}
	type consumption struct {
		ID             string      `json:"id"`
		AgentID        string      `json:"agentId"`
		IdempotencyKey string      `json:"idempotencyKey"`
		Cost           money.Money `json:"cost"`
		BalanceAfter   money.Money `json:"balanceAfter"`
		OccurredAt     time.Time   `json:"occurredAt"`
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.POST("/v1/consume", func(c echo.Context) error {
		var req request
		if err := c.Bind(&req); err != nil {
			return err
		}
		ctx := c.Request().Context()
		tx, err := pool.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // a no-op after Commit
		var left int64
		err = tx.QueryRow(ctx, `UPDATE ref_balances SET cents = cents - $2 WHERE agent_id = $1 AND cents >= $2 RETURNING cents`,
			req.AgentID, req.Cost.Cents).Scan(&left)
		if errors.Is(err, pgx.ErrNoRows) {
			return c.JSON(http.StatusPaymentRequired, map[string]string{"result": "denied"})
		} else if err != nil {
			return err
		}
		cons := consumption{ID: uuid.NewString(), AgentID: req.AgentID, IdempotencyKey: req.IdempotencyKey, Cost: req.Cost,
			BalanceAfter: money.Money{Cents: left, Currency: req.Cost.Currency}, OccurredAt: time.Now().UTC()}
		tag, err := tx.Exec(ctx, `INSERT INTO ref_consumptions (agent_id, idempotency_key, id, cents, occurred_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, cons.AgentID, cons.IdempotencyKey, cons.ID, cons.Cost.Cents, cons.OccurredAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return c.JSON(http.StatusOK, map[string]string{"result": "replay"}) // the deferred rollback returns the cents
		}
		if err := tx.Commit(ctx); err != nil {
			return err
		}
		return c.JSON(http.StatusOK, map[string]any{"result": "consumed", "consumption": cons})
	})
	url, stop, err := serve(e)
	if err != nil {
		pool.Close()
		return nil, nil, err
	}
	s := &httpServer{name: "reference", url: url,
		seed: func(ctx context.Context, agents []string, initial int64) error {
			_, err := pool.Exec(ctx, `INSERT INTO ref_balances (agent_id, cents) SELECT unnest($1::text[]), $2`, agents, initial)
			return err
		},
		charged: func(ctx context.Context, agents []string, initial int64) (lost, stored int64, err error) {
			err = pool.QueryRow(ctx, `SELECT (SELECT coalesce(sum($2 - cents), 0) FROM ref_balances WHERE agent_id = ANY($1)),
				(SELECT coalesce(sum(cents), 0) FROM ref_consumptions WHERE agent_id = ANY($1))`, agents, initial).Scan(&lost, &stored)
			return lost, stored, err
		},
	}
	return s, func() { stop(); pool.Close() }, nil
}

func serve(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	hs := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}
	return "http://" + ln.Addr().String() + "/v1/consume", stop, nil
}

// processCPU is this process's CPU time (user + system) so far.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// postgresCPU returns a reader of the PostgreSQL server's CPU time: the
// postmaster (found through data_directory/postmaster.pid, so the server
// must run on this machine and its files be readable) and every process it
// started, from /proc (user + system, with what exited children used).
func postgresCPU(ctx context.Context, pool *pgxpool.Pool) func() (time.Duration, error) {
	var dir string
	err := pool.QueryRow(ctx, `SELECT current_setting('data_directory')`).Scan(&dir)
	return func() (time.Duration, error) {
		if err != nil {
			return 0, err
		}
		b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
		if err != nil {
			return 0, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
		if err != nil {
			return 0, err
		}
		procs, err := os.ReadDir("/proc")
		if err != nil {
			return 0, err
		}
		var ticks int64
		for _, p := range procs {
			f, err := procStat(p.Name())
			if err != nil || (p.Name() != strconv.Itoa(pid) && f[1] != strconv.Itoa(pid)) {
				continue
			}
			for _, i := range []int{11, 12, 13, 14} { // utime, stime, cutime, cstime (after the state field)
				n, _ := strconv.ParseInt(f[i], 10, 64)
				ticks += n
			}
		}
		return time.Duration(ticks) * time.Second / 100, nil // USER_HZ is 100 on Linux
	}
}

// procStat returns the fields of /proc/PID/stat after the command name:
// state, ppid, … (so utime is index 11).
func procStat(pid string) ([]string, error) {
	if _, err := strconv.Atoi(pid); err != nil {
		return nil, err
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return nil, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil, fmt.Errorf("bad stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("bad stat")
	}
	return f, nil
}
