package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/loadgen"
	"github.com/stipend-mcp/stipend/internal/pgmigrate"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// runWallet (-mode wallet) measures a shared wallet (issue 28): -members
// agents, each a member of one wallet with a daily cap, spending its one
// credits entitlement through -instances store instances on one database,
// against the same load on -members agents with an entitlement each (with
// the same daily spend limit on the entitlement), alternating in -rounds,
// each run on fresh IDs. Calls go round the members and, independently,
// round the instances; every call names no entitlement (the candidates are
// looked up, as a gate's call does). The cap is -cap-fraction of a member's
// calls, so the last calls of each member are refused by its cap: answered
// calls (charged or refused by the cap) count toward the rate. After each
// run it checks that every cap held exactly (each member charged
// min(calls, cap) times) and that the balances are exact.
//
//	go run ./cmd/consumebench -mode wallet -store memory
//	go run ./cmd/consumebench -mode wallet -store postgres -postgres-url 'postgres://USER@127.0.0.1:5432/DB'
//	FIRESTORE_EMULATOR_HOST=127.0.0.1:PORT go run ./cmd/consumebench -mode wallet -store firestore
func runWallet(ctx context.Context, c config, out io.Writer) error {
	if c.members < 1 || c.instances < 1 || c.calls < c.members || c.capFraction <= 0 || c.capFraction > 1 {
		return fmt.Errorf("-mode wallet: want -members ≥ 1, -instances ≥ 1, -calls ≥ -members, 0 < -cap-fraction ≤ 1")
	}
	t, closeTarget, err := openWalletTarget(ctx, c, out)
	if err != nil {
		return err
	}
	defer closeTarget()
	perMember := c.calls / c.members
	calls := perMember * c.members // every member makes the same number of calls
	capCents := max(int64(float64(perMember*cost)*c.capFraction), 1)
	fmt.Fprintf(out, "consumebench -mode wallet on %s, %s: %d members × %d instances, %d callers, %d calls per run (%d per member), daily cap %d cents per member\n\n",
		t.name, time.Now().UTC().Format(time.RFC3339), c.members, c.instances, c.callers, calls, perMember, capCents)
	w := walletRun{c: c, t: t, calls: calls, capCents: capCents}
	var results []walletResult
	ratios := make([]float64, c.rounds)
	for round := range c.rounds {
		rates := map[bool]float64{}
		for i := range 2 {
			shared := (i+round)%2 == 0 // the wallet first in odd rounds (1, 3, …)
			r, err := w.run(ctx, shared)
			if err != nil {
				return err
			}
			r.round = round + 1
			results = append(results, r)
			rates[shared] = r.rate()
		}
		ratios[round] = rates[true] / rates[false]
	}
	printWalletTable(out, results)
	printRoundRatios(out, "the wallet's answered calls/s against the own entitlements', same round:", ratios)
	return nil
}

// walletTarget is the database a wallet run measures: open makes the run's
// store instances on it, and the function that closes them.
type walletTarget struct {
	name string
	open func(ctx context.Context) ([]store.EntitlementStore, func(), error)
}

// openWalletTarget opens -store's database; the function closes it.
func openWalletTarget(ctx context.Context, c config, out io.Writer) (walletTarget, func(), error) {
	n := c.instances
	switch c.store {
	case "memory":
		// A fresh store per run; one store in the process is one database,
		// so the instances are one.
		return walletTarget{name: "the memory store (a fresh one per run; its instances are one)", open: func(context.Context) ([]store.EntitlementStore, func(), error) {
			return slices.Repeat([]store.EntitlementStore{memory.New()}, n), func() {}, nil
		}}, func() {}, nil
	case "postgres":
		cfg, drop, err := walletSchema(ctx, c, out)
		if err != nil {
			return walletTarget{}, nil, err
		}
		return walletTarget{name: "PostgreSQL", open: func(ctx context.Context) ([]store.EntitlementStore, func(), error) {
			return openStores(n, func() (store.EntitlementStore, func(), error) {
				p, err := pgxpool.NewWithConfig(ctx, cfg.Copy())
				if err != nil {
					return nil, nil, err
				}
				return postgres.New(p), p.Close, nil
			})
		}}, drop, nil
	case "firestore":
		host := os.Getenv("FIRESTORE_EMULATOR_HOST")
		if host == "" {
			return walletTarget{}, nil, errors.New("-store firestore: FIRESTORE_EMULATOR_HOST is not set: this bench only runs on the emulator")
		}
		return walletTarget{name: "the Firestore emulator at " + host, open: func(ctx context.Context) ([]store.EntitlementStore, func(), error) {
			prefix := "bench" + uuid.NewString()[:8] + "_"
			return openStores(n, func() (store.EntitlementStore, func(), error) {
				cl, err := firestore.NewClient(ctx, projectID)
				if err != nil {
					return nil, nil, err
				}
				st := fsstore.New(cl, fsstore.WithCollectionPrefix(prefix), fsstore.WithLeases(fsstore.LeaseOptions{Off: c.leases == "off"}))
				return st, func() { _ = cl.Close() }, nil
			})
		}}, func() {}, nil
	}
	return walletTarget{}, nil, fmt.Errorf("-store %q: want memory, postgres or firestore", c.store)
}

// openStores opens n store instances with open, each with the client or
// pool it closes after the store, and answers them with a function that
// closes them all; on an error it closes what it opened.
func openStores(n int, open func() (store.EntitlementStore, func(), error)) ([]store.EntitlementStore, func(), error) {
	var stores []store.EntitlementStore
	var after []func()
	closeAll := func() {
		for i, s := range stores {
			_ = s.Close()
			after[i]()
		}
	}
	for range n {
		s, closeClient, err := open()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		stores, after = append(stores, s), append(after, closeClient)
	}
	return stores, closeAll, nil
}

// walletSchema makes and migrates a schema of the bench's own on
// -postgres-url and returns the pool configuration that uses it, and a
// function that drops it.
func walletSchema(ctx context.Context, c config, out io.Writer) (*pgxpool.Config, func(), error) {
	if c.postgresURL == "" {
		return nil, nil, errors.New("-store postgres needs -postgres-url")
	}
	admin, err := pgxpool.New(ctx, c.postgresURL)
	if err != nil {
		return nil, nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := pgx.Identifier{"stipend_wallet_bench_" + hex.EncodeToString(b[:])}.Sanitize()
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		return nil, nil, err
	}
	drop := func() {
		_, _ = admin.Exec(context.WithoutCancel(ctx), "DROP SCHEMA "+schema+" CASCADE") // best effort at exit
		admin.Close()
	}
	cfg, err := pgxpool.ParseConfig(c.postgresURL)
	if err != nil {
		drop()
		return nil, nil, err
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = strings.Trim(schema, `"`)
	cfg.MaxConns = int32(c.maxConns)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		drop()
		return nil, nil, err
	}
	defer pool.Close()
	if _, err := pgmigrate.Up(ctx, pool, postgres.Migrations); err != nil {
		drop()
		return nil, nil, err
	}
	var version string
	if err := pool.QueryRow(ctx, `SELECT current_setting('server_version')`).Scan(&version); err != nil {
		drop()
		return nil, nil, err
	}
	fmt.Fprintf(out, "PostgreSQL %s at %s:%d, schema %s, pools of %d connections per instance\n", version, cfg.ConnConfig.Host, cfg.ConnConfig.Port, schema, c.maxConns)
	return cfg, drop, nil
}

// walletRun is one bench's settings.
type walletRun struct {
	c        config
	t        walletTarget
	calls    int
	capCents int64
}

// walletResult is one run's measurement.
type walletResult struct {
	round                   int
	scenario                string
	calls, ok, refused, bad int
	wall                    time.Duration
	latencies               []time.Duration
	caps, balance, firstErr string
}

// rate is the run's answered calls (charged or refused by a cap) per second.
func (r walletResult) rate() float64 { return float64(r.ok+r.refused) / r.wall.Seconds() }

// run makes a fresh wallet and its members (shared) or agents with their
// own entitlements, drives the calls and checks caps and balances.
func (w walletRun) run(ctx context.Context, shared bool) (walletResult, error) {
	stores, closeStores, err := w.t.open(ctx)
	if err != nil {
		return walletResult{}, err
	}
	defer closeStores()
	s0, c := stores[0], w.c
	id := uuid.NewString()[:8]
	agents := make([]string, c.members)
	for i := range agents {
		agents[i] = fmt.Sprintf("%s-agent-%d", id, i)
	}
	daily := entitlement.Limits{Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, Max: usdCents(w.capCents)}}
	perMember := w.calls / c.members
	r := walletResult{scenario: fmt.Sprintf("%d own entitlements", c.members), calls: w.calls}
	var wallet string
	var ids []string
	initial := int64(w.calls*cost + 1000)
	refusal := entitlement.ReasonSpendLimit
	if shared {
		r.scenario, refusal = "1 wallet", entitlement.ReasonMemberLimit
		wallet = id + "-wallet"
		if _, err := s0.UpsertAccount(ctx, entitlement.Account{AgentID: wallet, Kind: entitlement.KindWallet}); err != nil {
			return r, err
		}
		e, err := grant(ctx, s0, wallet, initial, entitlement.SpendLimit{})
		if err != nil {
			return r, err
		}
		ids = []string{e}
		for _, a := range agents {
			if _, err := s0.AddMember(ctx, entitlement.Membership{WalletID: wallet, MemberID: a, Caps: daily}); err != nil {
				return r, err
			}
		}
	} else {
		initial = int64(perMember*cost + 1000)
		for _, a := range agents {
			e, err := grant(ctx, s0, a, initial, daily.Spend)
			if err != nil {
				return r, err
			}
			ids = append(ids, e)
		}
	}
	var refused atomic.Int64
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	l := loadgen.Drive(runCtx, c.callers, w.calls, func(ctx context.Context, i int) error {
		req := request("", "k-"+strconv.Itoa(i))
		req.AgentID = agents[i%len(agents)]
		res, err := stores[i%len(stores)].CheckAndConsume(ctx, req)
		switch {
		case err != nil:
			return err
		case res.Outcome == store.Consumed:
			return nil
		case res.Outcome == store.Denied && len(res.Denials) > 0 && res.Denials[0].Reason == refusal:
			refused.Add(1)
			return nil
		}
		return fmt.Errorf("outcome %s %v", res.Outcome, res.Denials)
	})
	r.ok, r.bad, r.wall, r.latencies, r.firstErr = l.OK-int(refused.Load()), l.Failed, l.Wall, l.Latencies, l.FirstErr
	r.refused = int(refused.Load())
	if r.caps, err = w.checkCaps(ctx, s0, wallet, agents, perMember); err != nil {
		return r, err
	}
	if shared {
		r.balance, err = loadgen.CheckBalances(ctx, s0, wallet, ids, initial)
		return r, err
	}
	r.balance = "exact"
	for i, a := range agents {
		b, err := loadgen.CheckBalances(ctx, s0, a, ids[i:i+1], initial)
		if err != nil {
			return r, err
		}
		if b != "exact" {
			r.balance = a + ": " + b
			break
		}
	}
	return r, nil
}

// checkCaps checks that every agent was charged exactly min(its calls,
// the cap) cents: the cap never exceeded, and no call refused below it
// (in a run cut short by the deadline, only the first). It reads the
// charges from the wallet's consumptions (each names its member) or each
// agent's own.
func (w walletRun) checkCaps(ctx context.Context, s store.EntitlementStore, wallet string, agents []string, perMember int) (string, error) {
	charged := map[string]int64{}
	list := func(account string) error {
		for cursor := ""; ; {
			page, next, err := s.ListConsumptions(ctx, account, time.Time{}, store.Page{Cursor: cursor})
			if err != nil {
				return err
			}
			for _, c := range page {
				charged[c.AgentID] += c.Cost.Cents
			}
			if cursor = next; cursor == "" {
				return nil
			}
		}
	}
	if wallet != "" {
		if err := list(wallet); err != nil {
			return "", err
		}
	} else {
		for _, a := range agents {
			if err := list(a); err != nil {
				return "", err
			}
		}
	}
	want := min(int64(perMember*cost), w.capCents)
	for _, a := range agents {
		switch got := charged[a]; {
		case got > w.capCents:
			return fmt.Sprintf("EXCEEDED: %s charged %d > cap %d", a, got, w.capCents), nil
		case got != want:
			return fmt.Sprintf("held, but %s charged %d, want %d", a, got, want), nil
		}
	}
	return "held, exact", nil
}

// grant gives agent a credits entitlement of cents USD with the spend
// limit given (no Period: none), set as the API sets one.
func grant(ctx context.Context, s store.EntitlementStore, agent string, cents int64, limit entitlement.SpendLimit) (string, error) {
	m := usdCents(cents)
	e := entitlement.Entitlement{ID: uuid.NewString(), AgentID: agent, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "bench"}, Credits: entitlement.Credits{Balance: m, Granted: m}}
	if limit.Period != "" {
		if err := e.Apply(entitlement.Update{SpendLimit: &entitlement.Set[entitlement.SpendLimit]{To: limit}}, time.Now()); err != nil {
			return "", err
		}
	}
	e, err := s.CreateEntitlement(ctx, e)
	return e.ID, err
}

// usdCents is cents of USD.
func usdCents(cents int64) money.Money { return money.Money{Cents: cents, Currency: "USD"} }

func printWalletTable(out io.Writer, rs []walletResult) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "round\tscenario\tcalls\tcharged\trefused by cap\tfailed\tnot run\twall\tanswered/s\tp50\tp99\tcaps\tbalance\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%.0f\t%s\t%s\t%s\t%s\t\n", r.round, r.scenario, r.calls, r.ok, r.refused, r.bad,
			r.calls-r.ok-r.refused-r.bad, r.wall.Seconds(), r.rate(), ms(percentile(r.latencies, 0.50)), ms(percentile(r.latencies, 0.99)), r.caps, r.balance)
	}
	w.Flush()
	for _, r := range rs {
		if r.firstErr != "" {
			fmt.Fprintf(out, "\nfirst error of round %d, %s: %s", r.round, r.scenario, truncate(r.firstErr, 200))
		}
	}
	fmt.Fprintln(out)
}
