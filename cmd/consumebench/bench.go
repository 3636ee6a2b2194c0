package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/loadgen"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

const (
	projectID = "stipend-bench"
	agentID   = "bench-agent"
	cost      = 1 // cents per consume
)

// result is one scenario's measurement.
type result struct {
	name, path          string
	callers, ents, want int
	ok, failed          int
	wall                time.Duration
	latencies           []time.Duration
	balance             string
	firstErr            string
	// multi marks a multi-process scenario, whose children's store
	// counters are stats.
	multi bool
	stats fsstore.Stats
	round int // of the multi-process pair (-proc-rounds)
	// cpuSelf and cpuEmulator are the CPU time the run took in this
	// process and in the emulator (-mode spread).
	cpuSelf, cpuEmulator time.Duration
}

// consumeFunc charges one call to entitlement ent with key.
type consumeFunc func(ctx context.Context, ent, key string) error

func runBench(ctx context.Context, c config, host string, out io.Writer) error {
	client, err := firestore.NewClient(ctx, projectID)
	if err != nil {
		return err
	}
	defer client.Close()
	fmt.Fprintf(out, "consumebench on the Firestore emulator at %s, %s\n\n", host, time.Now().UTC().Format(time.RFC3339))

	var results []result
	add := func(r result, err error) error {
		if err != nil {
			return err
		}
		results = append(results, r)
		return nil
	}
	type run struct {
		name, path           string
		callers, ents, calls int
		mk                   pathFunc
	}
	var runs []run
	for _, p := range []struct {
		path string
		mk   pathFunc
	}{{"naive", naivePath}, {"stipend", stipendPath}} {
		if p.path == "naive" && !c.naive {
			continue
		}
		runs = append(runs, run{"baseline: 1 caller, 1 at a time", p.path, 1, 1, c.baseline, p.mk})
	}
	for _, ents := range []int{1, c.entitlements} {
		name := fmt.Sprintf("%d callers, %d entitlement(s)", c.callers, ents)
		if c.naive {
			runs = append(runs, run{name, "naive", c.callers, ents, c.calls, naivePath})
		}
		runs = append(runs, run{name, "stipend", c.callers, ents, c.calls, stipendPath})
	}
	for _, r := range runs {
		if err := add(scenario(ctx, client, c, r.name, r.path, r.callers, r.ents, r.calls, r.mk)); err != nil {
			return err
		}
	}
	if c.procs > 0 {
		// Back to back: the same machine state for both. With several
		// rounds the order alternates (shared first in odd rounds), so
		// neither side always runs on a machine the other warmed.
		for round := 1; round <= c.procRounds; round++ {
			order := []bool{false, true}
			if round%2 == 0 {
				order = []bool{true, false}
			}
			for _, own := range order {
				r, err := multiProcess(ctx, client, c, own)
				r.round = round
				if c.procRounds > 1 {
					r.name += fmt.Sprintf(" (round %d)", round)
				}
				if err := add(r, err); err != nil {
					return err
				}
			}
		}
	}
	printTable(out, results)
	printRatios(out, results)
	printStats(out, results)
	return nil
}

// pathFunc builds a scenario's consume on a fresh prefix.
type pathFunc func(client *firestore.Client, s *fsstore.Store, prefix string) consumeFunc

// naivePath is the design the issue measured: one Firestore transaction
// per call (the client's default retry: 5 attempts on ABORTED), reading the
// consumption and the entitlement, then updating the balance and creating
// the consumption.
func naivePath(client *firestore.Client, _ *fsstore.Store, prefix string) consumeFunc {
	return func(ctx context.Context, ent, key string) error {
		return naiveConsume(ctx, client, prefix, agentID, ent, key)
	}
}

// stipendPath is Store.CheckAndConsume.
func stipendPath(_ *firestore.Client, s *fsstore.Store, _ string) consumeFunc {
	return func(ctx context.Context, ent, key string) error {
		res, err := s.CheckAndConsume(ctx, request(ent, key))
		if err != nil {
			return err
		}
		if res.Outcome != store.Consumed {
			return fmt.Errorf("outcome %s %v", res.Outcome, res.Denials)
		}
		return nil
	}
}

func request(ent, key string) entitlement.ConsumeRequest {
	m := money.Money{Cents: cost, Currency: "USD"}
	return entitlement.ConsumeRequest{AgentID: agentID, Service: "bench", Tool: "call", IdempotencyKey: key, Cost: &m, EntitlementID: ent}
}

// createEntitlements makes n credits entitlements, each able to pay calls
// consumes plus a margin, and returns their IDs and initial balance.
func createEntitlements(ctx context.Context, s *fsstore.Store, n, calls int) ([]string, int64, error) {
	initial := int64(calls*cost + 1000)
	ids := make([]string, n)
	for i := range ids {
		e, err := s.CreateEntitlement(ctx, entitlement.Entitlement{
			ID: uuid.NewString(), AgentID: agentID, Type: entitlement.TypeCredits,
			Scope:   entitlement.Scope{Service: "bench"},
			Credits: entitlement.Credits{Balance: money.Money{Cents: initial, Currency: "USD"}},
		})
		if err != nil {
			return nil, 0, err
		}
		ids[i] = e.ID
	}
	return ids, initial, nil
}

func scenario(ctx context.Context, client *firestore.Client, c config, name, path string, callers, ents, calls int, mk pathFunc) (result, error) {
	prefix := "bench" + uuid.NewString()[:8] + "_"
	s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix), fsstore.WithLeases(fsstore.LeaseOptions{Off: c.leases == "off"}))
	ids, initial, err := createEntitlements(ctx, s, ents, calls)
	if err != nil {
		return result{}, err
	}
	consume := mk(client, s, prefix)
	r := result{name: name, path: path, callers: callers, ents: ents, want: calls}
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	l := loadgen.Drive(runCtx, callers, calls, func(ctx context.Context, i int) error {
		return consume(ctx, ids[i%len(ids)], fmt.Sprintf("k-%d", i))
	})
	r.ok, r.failed, r.wall, r.latencies, r.firstErr = l.OK, l.Failed, l.Wall, l.Latencies, l.FirstErr
	r.balance, err = loadgen.CheckBalances(ctx, s, agentID, ids, initial)
	return r, err
}

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func printTable(out io.Writer, rs []result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tpath\tcallers\tents\tcalls\tok\tfailed\tnot run\twall\tok/s\tp50\tp99\tbalance\t")
	for _, r := range rs {
		tput := float64(r.ok) / r.wall.Seconds()
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%.0f\t%s\t%s\t%s\t\n",
			r.name, r.path, r.callers, r.ents, r.want, r.ok, r.failed, r.want-r.ok-r.failed,
			r.wall.Seconds(), tput, ms(percentile(r.latencies, 0.50)), ms(percentile(r.latencies, 0.99)), r.balance)
	}
	w.Flush()
	for _, r := range rs {
		if r.firstErr != "" {
			fmt.Fprintf(out, "\nfirst error of %s / %s: %s", r.name, r.path, truncate(r.firstErr, 200))
		}
	}
	fmt.Fprintln(out)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// printRatios compares each many-caller scenario's throughput with the
// single-caller baselines of the same run.
func printRatios(out io.Writer, rs []result) {
	base := map[string]float64{}
	for _, r := range rs {
		if r.callers == 1 {
			base[r.path] = float64(r.ok) / r.wall.Seconds()
		}
	}
	fmt.Fprintln(out, "\nthroughput against the single-caller baselines of this run (naive / stipend):")
	for _, r := range rs {
		if r.callers == 1 {
			continue
		}
		t := float64(r.ok) / r.wall.Seconds()
		fmt.Fprintf(out, "  %-42s %-8s %s / %s\n", r.name, r.path, ratio(t, base["naive"]), ratio(t, base["stipend"]))
	}
}

func ratio(t, base float64) string {
	if base == 0 {
		return "     -"
	}
	return fmt.Sprintf("%5.1fx", t/base)
}

// printStats shows the multi-process scenarios' transaction counters and
// the shared entitlement's rate against the own-entitlement one.
func printStats(out io.Writer, rs []result) {
	shared, own := map[int]float64{}, map[int]float64{}
	fmt.Fprintln(out, "\nmulti-process store counters (all children):")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tbatches\tlease batches\taborts/1k batches\tlock timeouts/1k batches\tconflicts/1k batches\trefills/s\tgathers/s\t")
	for _, r := range rs {
		if !r.multi {
			continue
		}
		tput := float64(r.ok) / r.wall.Seconds()
		if r.ents == 1 {
			shared[r.round] = tput
		} else {
			own[r.round] = tput
		}
		st := r.stats
		all := float64(max(st.Batches+st.LeaseBatches, 1))
		fmt.Fprintf(w, "%s\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", r.name, st.Batches, st.LeaseBatches,
			1000*float64(st.Aborts)/all, 1000*float64(st.LockTimeouts)/all, 1000*float64(st.Conflicts)/all,
			float64(st.Refills)/r.wall.Seconds(), float64(st.Gathers)/r.wall.Seconds())
	}
	w.Flush()
	var ratios []float64
	var each []string
	for round := 1; own[round] > 0; round++ {
		ratios = append(ratios, shared[round]/own[round])
		each = append(each, fmt.Sprintf("%.2fx", shared[round]/own[round]))
	}
	switch len(ratios) {
	case 0:
	case 1:
		fmt.Fprintf(out, "\none entitlement / own entitlements: %s\n", each[0])
	default:
		slices.Sort(ratios)
		median := ratios[len(ratios)/2]
		if len(ratios)%2 == 0 {
			median = (ratios[len(ratios)/2-1] + ratios[len(ratios)/2]) / 2
		}
		fmt.Fprintf(out, "\none entitlement / own entitlements, by round: %s; median %.2fx\n", strings.Join(each, ", "), median)
	}
}
