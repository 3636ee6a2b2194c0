// Command consumebench measures CheckAndConsume on the Firestore emulator:
// a naive one-transaction-per-call consume against Stipend's coalescing
// path, with many concurrent callers on one credits entitlement and on many,
// and four server processes sharing one entitlement. It prints one table.
// With -mode holds it sets two-step charges (Authorize, then CaptureHold)
// against plain consumes instead, each by -callers callers on one
// entitlement. With -mode wallet it measures a shared wallet against own
// entitlements (wallet.go), on the memory store and PostgreSQL too.
//
//	scripts/test-style emulator required:
//	FIRESTORE_EMULATOR_HOST=127.0.0.1:PORT go run ./cmd/consumebench
//
// It refuses to run on Firestore without FIRESTORE_EMULATOR_HOST, so it
// never loads a real Firestore database, and every scenario stops at its
// deadline.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "consumebench:", err)
		os.Exit(1)
	}
}

// config is the bench's flags.
type config struct {
	calls        int
	callers      int
	entitlements int
	baseline     int
	procs        int
	procCallers  int
	procCalls    int
	procRounds   int
	deadline     time.Duration
	naive        bool
	mode         string
	rounds       int
	agents       int
	leases       string
	latency      time.Duration
	warmup       int
	emulatorPGID int
	child        childConfig
	// -mode wallet (wallet.go).
	store       string
	members     int
	instances   int
	capFraction float64
	postgresURL string
	maxConns    int
}

func run(ctx context.Context, args []string, out io.Writer) error {
	var c config
	fs := flag.NewFlagSet("consumebench", flag.ContinueOnError)
	fs.IntVar(&c.calls, "calls", 2000, "consumes per scenario (unique keys)")
	fs.IntVar(&c.callers, "callers", 64, "concurrent callers")
	fs.IntVar(&c.entitlements, "entitlements", 64, "entitlements in the spread scenario")
	fs.IntVar(&c.baseline, "baseline-calls", 200, "consumes of the single-caller baseline")
	fs.IntVar(&c.procCallers, "proc-callers", 32, "concurrent callers per server process")
	fs.IntVar(&c.procCalls, "proc-calls", 500, "consumes per server process")
	fs.IntVar(&c.procRounds, "proc-rounds", 1, "rounds of the multi-process pair (one entitlement, own entitlements), alternating their order; the ratio is given per round and as the median")
	fs.BoolVar(&c.naive, "naive", true, "run the naive scenarios too (false: only Stipend's path, for quick reruns)")
	fs.IntVar(&c.procs, "procs", 4, "server processes sharing one entitlement (0: skip that scenario)")
	fs.StringVar(&c.mode, "mode", "consume", `"consume": the naive and coalesced consume scenarios; "holds": authorize+capture pairs against plain consumes, -callers each on one entitlement; "spread": -agents agents with an entitlement each, Stipend's consume (no entitlementId) against the naive transaction; "wallet": -members members with daily caps on one shared wallet through -instances store instances against the same load on own entitlements (-store memory, postgres or firestore)`)
	fs.StringVar(&c.store, "store", "firestore", "-mode wallet: the store measured: memory, postgres (-postgres-url) or firestore (the emulator)")
	fs.IntVar(&c.members, "members", 64, "-mode wallet: members of the wallet (and agents of the baseline)")
	fs.IntVar(&c.instances, "instances", 3, "-mode wallet: store instances on one database the calls go through")
	fs.Float64Var(&c.capFraction, "cap-fraction", 0.9, "-mode wallet: each member's daily cap as a fraction of what its calls cost")
	fs.StringVar(&c.postgresURL, "postgres-url", "", "-mode wallet -store postgres: the server (a schema of the bench's own is made and dropped)")
	fs.IntVar(&c.maxConns, "max-conns", 16, "-mode wallet -store postgres: connections per instance's pool")
	fs.IntVar(&c.rounds, "rounds", 5, "-mode holds and spread: rounds of the two scenarios")
	fs.IntVar(&c.warmup, "warmup", 1, "-mode spread: rounds of both scenarios run first and left out of the ratios (the emulator speeds up as its JIT warms, so the side run first on a fresh emulator would look best)")
	fs.IntVar(&c.emulatorPGID, "emulator-pgid", 0, "-mode spread: the process group of the emulator (docs/bench/issue27-firestore.sh passes it), whose CPU time is counted per call with this process's")
	fs.IntVar(&c.agents, "agents", 200, "-mode spread: agents, each with its own entitlement")
	fs.DurationVar(&c.deadline, "deadline", 60*time.Second, "time limit of each scenario; calls not started by then count as not run")
	fs.BoolVar(&c.child.enabled, "child", false, "internal: run as one server process of the multi-process scenario")
	fs.StringVar(&c.child.prefix, "child-prefix", "", "internal")
	fs.StringVar(&c.child.entitlementID, "child-entitlement", "", "internal")
	fs.StringVar(&c.child.keyPrefix, "child-keys", "", "internal")
	fs.StringVar(&c.leases, "leases", "auto", `the stores' escrow leases: "auto" (the default: when another instance is active) or "off"`)
	fs.DurationVar(&c.latency, "latency", 0, "put a loopback proxy adding this delay each way in front of the emulator (e.g. 5ms), closer to production's transaction times")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.mode == "wallet" && c.store != "firestore" {
		return runWallet(ctx, c, out)
	}
	host := os.Getenv("FIRESTORE_EMULATOR_HOST")
	if host == "" {
		return fmt.Errorf("FIRESTORE_EMULATOR_HOST is not set: this bench only runs on the emulator")
	}
	if c.child.enabled {
		c.child.callers, c.child.calls, c.child.deadline, c.child.leases = c.procCallers, c.procCalls, c.deadline, c.leases
		return runChild(ctx, c.child, os.Stdin, out)
	}
	if c.latency > 0 {
		p, err := startLatencyProxy(host, c.latency)
		if err != nil {
			return err
		}
		defer p.Close()
		host = p.Addr().String()
		// The children inherit it, and this process's clients read it.
		if err := os.Setenv("FIRESTORE_EMULATOR_HOST", host); err != nil {
			return err
		}
	}
	switch c.mode {
	case "consume":
		return runBench(ctx, c, host, out)
	case "holds":
		return runHolds(ctx, c, host, out)
	case "spread":
		return runSpread(ctx, c, host, out)
	case "wallet":
		return runWallet(ctx, c, out)
	}
	return fmt.Errorf("-mode %q: want consume, holds, spread or wallet", c.mode)
}
