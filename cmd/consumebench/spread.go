package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
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

// runSpread (-mode spread) is the common case of a service in front of
// many MCP servers: many agents, each with its own credits entitlement,
// calls going round the agents. Stipend's consume names no entitlement (so
// it looks the candidates up, as a gate's call does) against the naive
// transaction (naiveConsume: the key and the entitlement read, the balance
// and the consumption written, in one Firestore transaction), alternating
// in rounds, each on fresh collections; balances checked after every run.
func runSpread(ctx context.Context, c config, host string, out io.Writer) error {
	client, err := firestore.NewClient(ctx, projectID)
	if err != nil {
		return err
	}
	defer client.Close()
	fmt.Fprintf(out, "consumebench -mode spread on the Firestore emulator at %s, %s: %d agents, %d callers, %d calls per run, %d warm-up round(s)\n\n",
		host, time.Now().UTC().Format(time.RFC3339), c.agents, c.callers, c.calls, c.warmup)
	clock := cpuClock{c.emulatorPGID}
	var results []result
	ratios := make([]float64, 0, c.rounds)
	cpuRatios := make([]float64, 0, c.rounds)
	// The warm-up rounds alternate like the others; the measured rounds
	// start with the side the last warm-up round ran second.
	for round := range c.warmup + c.rounds {
		rates, cpu := map[string]float64{}, map[string]float64{}
		for i := range 2 {
			path := []string{"naive", "stipend"}[(i+round)%2]
			self0, emu0 := clock.read()
			r, err := spreadRun(ctx, client, c, path)
			if err != nil {
				return err
			}
			self1, emu1 := clock.read()
			r.cpuSelf, r.cpuEmulator = self1-self0, emu1-emu0
			if round < c.warmup {
				r.name = fmt.Sprintf("warm-up %d (left out)", round+1)
			} else {
				r.name = fmt.Sprintf("round %d: %d agents", round-c.warmup+1, c.agents)
			}
			results = append(results, r)
			rates[path] = rate(r)
			cpu[path] = float64(r.cpuSelf+r.cpuEmulator) / float64(max(r.ok, 1))
		}
		if round >= c.warmup {
			ratios = append(ratios, rates["stipend"]/rates["naive"])
			cpuRatios = append(cpuRatios, cpu["stipend"]/cpu["naive"])
		}
	}
	printTable(out, results)
	printCPU(out, results)
	printRoundRatios(out, "Stipend's consumes/s against the naive transaction's, same round:", ratios)
	if c.emulatorPGID > 0 {
		printRoundRatios(out, "Stipend's CPU per call (this process + the emulator) against the naive transaction's, same round:", cpuRatios)
	}
	return nil
}

// printCPU shows each run's CPU time per answered call: this process's
// (the store or the naive transaction, and the load generator) and the
// emulator's.
func printCPU(out io.Writer, rs []result) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tpath\tCPU/call, bench process\tCPU/call, emulator\tCPU/call, both\t")
	for _, r := range rs {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t\n", r.name, r.path, perCall(r.cpuSelf, r.ok), perCall(r.cpuEmulator, r.ok),
			perCall(r.cpuSelf+r.cpuEmulator, r.ok))
	}
	w.Flush()
}

// spreadRun makes c.agents agents with one entitlement each on fresh
// collections and runs c.calls consumes of path over them.
func spreadRun(ctx context.Context, client *firestore.Client, c config, path string) (result, error) {
	prefix := "bench" + uuid.NewString()[:8] + "_"
	s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
	defer s.Close()
	initial := int64(c.calls*cost + 1000)
	agents, ids := make([]string, c.agents), make([]string, c.agents)
	for i := range agents {
		agents[i] = "agent-" + strconv.Itoa(i)
		m := money.Money{Cents: initial, Currency: "USD"}
		e, err := s.CreateEntitlement(ctx, entitlement.Entitlement{ID: uuid.NewString(), AgentID: agents[i], Type: entitlement.TypeCredits,
			Scope: entitlement.Scope{Service: "bench"}, Credits: entitlement.Credits{Balance: m, Granted: m}})
		if err != nil {
			return result{}, err
		}
		ids[i] = e.ID
	}
	r := result{path: path, callers: c.callers, ents: c.agents, want: c.calls}
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	l := loadgen.Drive(runCtx, c.callers, c.calls, func(ctx context.Context, i int) error {
		agent, ent, key := agents[i%len(agents)], ids[i%len(ids)], "k-"+strconv.Itoa(i)
		if path == "naive" {
			return naiveConsume(ctx, client, prefix, agent, ent, key)
		}
		req := request("", key)
		req.AgentID = agent
		res, err := s.CheckAndConsume(ctx, req)
		if err == nil && res.Outcome != store.Consumed {
			err = fmt.Errorf("outcome %s %v", res.Outcome, res.Denials)
		}
		return err
	})
	r.ok, r.failed, r.wall, r.latencies, r.firstErr = l.OK, l.Failed, l.Wall, l.Latencies, l.FirstErr
	r.balance = "exact"
	for i := range agents {
		b, err := loadgen.CheckBalances(ctx, s, agents[i], ids[i:i+1], initial)
		if err != nil {
			return result{}, err
		}
		if b != "exact" {
			r.balance = agents[i] + ": " + b
			break
		}
	}
	return r, nil
}
