// Command storebench measures a hot entitlement on every store in one run:
// CheckAndConsume with 64 concurrent callers on one credits entitlement and
// on 64, on PostgreSQL (Stipend's coalescing path, the same store with
// plain row locks, several store instances on one database) beside a bare
// `UPDATE … RETURNING` loop on the same server as the baseline, and on the
// memory store and the Firestore emulator. It prints one table.
//
//	go run ./cmd/storebench -postgres-url 'postgres://USER@127.0.0.1:5432/DB'
//	FIRESTORE_EMULATOR_HOST=127.0.0.1:8555 go run ./cmd/storebench -postgres-url …   # the emulator too
//
// On PostgreSQL it works in a schema of its own (stipend_bench_<random>),
// created and migrated at start and dropped at the end, so it never reads
// or writes anything else. Every scenario stops at its deadline.
//
// With -http it measures POST /v1/consume over HTTP instead: Stipend's API
// on the PostgreSQL store against a bare-SQL reference server, spread over
// many agents and on one hot agent, in alternating rounds (http.go):
//
//	go run ./cmd/storebench -http -postgres-url …
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Getenv("FIRESTORE_EMULATOR_HOST"), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "storebench:", err)
		os.Exit(1)
	}
}

// config is the bench's flags.
type config struct {
	postgresURL  string
	emulator     string // FIRESTORE_EMULATOR_HOST; "" skips Firestore
	calls        int
	callers      int
	entitlements int
	instances    int
	baseline     int
	maxConns     int
	deadline     time.Duration
	memory       bool
	// The HTTP comparison (http.go).
	http                                       bool
	cpuProfile                                 string
	httpHot                                    bool
	agents, httpCallers, httpCalls, httpRounds int
}

func run(ctx context.Context, args []string, emulator string, out io.Writer) error {
	c := config{emulator: emulator}
	fs := flag.NewFlagSet("storebench", flag.ContinueOnError)
	fs.StringVar(&c.postgresURL, "postgres-url", "", "PostgreSQL server to measure (a schema of the bench's own is made and dropped); empty skips PostgreSQL")
	fs.IntVar(&c.calls, "calls", 2000, "calls per scenario (unique keys)")
	fs.IntVar(&c.callers, "callers", 64, "concurrent callers")
	fs.IntVar(&c.entitlements, "entitlements", 64, "entitlements in the spread scenarios")
	fs.IntVar(&c.instances, "instances", 4, "PostgreSQL store instances (each with its own pool) sharing one entitlement; 0 skips")
	fs.IntVar(&c.baseline, "baseline-calls", 500, "calls of the single-caller scenarios")
	fs.IntVar(&c.maxConns, "max-conns", 16, "pool size of each PostgreSQL store instance and of the bare baseline")
	fs.DurationVar(&c.deadline, "deadline", 60*time.Second, "time limit of each scenario; calls not started by then count as not run")
	fs.BoolVar(&c.memory, "memory", true, "measure the memory store too")
	fs.BoolVar(&c.http, "http", false, "instead of the table: POST /v1/consume over HTTP, Stipend's API on PostgreSQL against a bare-SQL reference server, spread and hot (needs -postgres-url)")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "-http: write a CPU profile of the whole run to this file")
	fs.BoolVar(&c.httpHot, "http-hot", true, "-http: run the hot scenario too")
	fs.IntVar(&c.agents, "agents", 1000, "-http: agents of the spread scenario, each with its own entitlement")
	fs.IntVar(&c.httpCallers, "http-callers", 32, "-http: concurrent callers, each on its own keep-alive connection")
	fs.IntVar(&c.httpCalls, "http-calls", 3000, "-http: calls per run")
	fs.IntVar(&c.httpRounds, "http-rounds", 5, "-http: rounds, each running both servers, the order alternating")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if c.http {
		if c.postgresURL == "" {
			return fmt.Errorf("-http needs -postgres-url")
		}
		if c.cpuProfile != "" {
			f, err := os.Create(c.cpuProfile)
			if err != nil {
				return err
			}
			defer f.Close()
			if err := pprof.StartCPUProfile(f); err != nil {
				return err
			}
			defer pprof.StopCPUProfile()
		}
		return httpBench(ctx, c, out)
	}
	if c.postgresURL == "" && c.emulator == "" && !c.memory {
		return fmt.Errorf("nothing to measure: give -postgres-url, FIRESTORE_EMULATOR_HOST or -memory")
	}
	fmt.Fprintf(out, "storebench %s: %d calls per scenario (%d alone), %d callers, %d entitlements spread\n\n",
		time.Now().UTC().Format(time.RFC3339), c.calls, c.baseline, c.callers, c.entitlements)
	var results []result
	if c.postgresURL != "" {
		rs, err := postgresScenarios(ctx, c, out)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	if c.memory {
		rs, err := storeScenarios(ctx, c, memoryTarget())
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	if c.emulator != "" {
		t, closeFS, err := firestoreTarget(ctx)
		if err != nil {
			return err
		}
		rs, err := storeScenarios(ctx, c, t)
		closeFS()
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	printTable(out, results)
	return nil
}
