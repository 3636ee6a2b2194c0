package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"cloud.google.com/go/firestore"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/internal/loadgen"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// childConfig is what one server process of the multi-process scenario runs.
type childConfig struct {
	enabled       bool
	prefix        string
	entitlementID string
	keyPrefix     string
	callers       int
	calls         int
	deadline      time.Duration
	leases        string // "auto" or "off"
}

// childReport is what a child prints when done.
type childReport struct {
	OK, Failed  int
	FirstErr    string
	LatenciesNs []int64
	Start, End  int64 // Unix nanoseconds
	Stats       fsstore.Stats
}

// runChild connects its own client and store (its own process, as a
// separate Stipend instance would), says "ready", waits for a line on in,
// runs its calls, and prints a childReport.
func runChild(ctx context.Context, c childConfig, in io.Reader, out io.Writer) error {
	client, err := firestore.NewClient(ctx, projectID)
	if err != nil {
		return err
	}
	defer client.Close()
	s := fsstore.New(client, fsstore.WithCollectionPrefix(c.prefix), fsstore.WithLeases(fsstore.LeaseOptions{Off: c.leases == "off"}))
	consume := stipendPath(client, s, c.prefix)
	// Warm the connection so the measured part is the consumes.
	if err := s.Ping(ctx); err != nil {
		return err
	}
	fmt.Fprintln(out, "ready")
	if _, err := bufio.NewReader(in).ReadString('\n'); err != nil {
		return fmt.Errorf("waiting for go: %w", err)
	}
	runCtx, cancel := context.WithTimeout(ctx, c.deadline)
	defer cancel()
	start := time.Now()
	l := loadgen.Drive(runCtx, c.callers, c.calls, func(ctx context.Context, i int) error {
		return consume(ctx, c.entitlementID, c.keyPrefix+strconv.Itoa(i))
	})
	rep := childReport{OK: l.OK, Failed: l.Failed, FirstErr: l.FirstErr, Start: start.UnixNano(), End: start.Add(l.Wall).UnixNano(),
		Stats: s.Stats()}
	// As on SIGTERM: what this instance reserved goes back.
	if err := s.ReleaseLeases(ctx); err != nil {
		return err
	}
	for _, d := range l.Latencies {
		rep.LatenciesNs = append(rep.LatenciesNs, int64(d))
	}
	return json.NewEncoder(out).Encode(rep)
}

// multiProcess runs c.procs child processes of this binary on one shared
// entitlement (own: each on an entitlement of its own), starts them
// together, and merges their reports.
func multiProcess(ctx context.Context, client *firestore.Client, c config, own bool) (result, error) {
	exe, err := os.Executable()
	if err != nil {
		return result{}, err
	}
	prefix := "bench" + uuid.NewString()[:8] + "_"
	s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
	total := c.procs * c.procCalls
	// Each entitlement holds 100 times what the run spends, as an agent's
	// credits do for one burst of calls: leases are sized by what is
	// free, and the end of a balance is the gathers' (the conformance
	// suites drain entitlements to zero across instances).
	ids, initial, err := createEntitlements(ctx, s, 1, 100*total)
	if own {
		ids, initial, err = createEntitlements(ctx, s, c.procs, 100*c.procCalls)
	}
	if err != nil {
		return result{}, err
	}
	// Bounded: children are killed if they outlive their deadline by far.
	ctx, cancel := context.WithTimeout(ctx, c.deadline+30*time.Second)
	defer cancel()
	type child struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Reader
	}
	children := make([]child, c.procs)
	for i := range children {
		cmd := exec.CommandContext(ctx, exe, "-child", "-child-prefix", prefix, "-child-entitlement", ids[i%len(ids)],
			"-child-keys", fmt.Sprintf("p%d-", i), "-proc-callers", strconv.Itoa(c.procCallers),
			"-proc-calls", strconv.Itoa(c.procCalls), "-deadline", c.deadline.String(), "-leases", c.leases)
		cmd.Stderr = os.Stderr
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return result{}, err
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return result{}, err
		}
		if err := cmd.Start(); err != nil {
			return result{}, err
		}
		defer cmd.Wait() //nolint:errcheck // reaped; failures show in the report
		children[i] = child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	}
	for i, ch := range children {
		if line, err := ch.out.ReadString('\n'); err != nil || line != "ready\n" {
			return result{}, fmt.Errorf("child %d did not get ready: %q %v", i, line, err)
		}
	}
	for _, ch := range children {
		fmt.Fprintln(ch.stdin, "go")
		ch.stdin.Close()
	}
	r := result{name: fmt.Sprintf("%d processes x %d callers, 1 entitlement", c.procs, c.procCallers), path: "stipend",
		callers: c.procs * c.procCallers, ents: len(ids), want: total, multi: true}
	if own {
		r.name = fmt.Sprintf("%d processes x %d callers, own entitlements", c.procs, c.procCallers)
	}
	var first, last int64
	for i, ch := range children {
		var rep childReport
		if err := json.NewDecoder(ch.out).Decode(&rep); err != nil {
			return result{}, fmt.Errorf("child %d report: %w", i, err)
		}
		r.ok += rep.OK
		r.failed += rep.Failed
		r.stats.Batches += rep.Stats.Batches
		r.stats.LeaseBatches += rep.Stats.LeaseBatches
		r.stats.Aborts += rep.Stats.Aborts
		r.stats.LockTimeouts += rep.Stats.LockTimeouts
		r.stats.Conflicts += rep.Stats.Conflicts
		r.stats.Refills += rep.Stats.Refills
		r.stats.Gathers += rep.Stats.Gathers
		if r.firstErr == "" {
			r.firstErr = rep.FirstErr
		}
		for _, ns := range rep.LatenciesNs {
			r.latencies = append(r.latencies, time.Duration(ns))
		}
		if first == 0 || rep.Start < first {
			first = rep.Start
		}
		last = max(last, rep.End)
	}
	r.wall = time.Duration(last - first)
	r.balance, err = loadgen.CheckBalances(context.WithoutCancel(ctx), s, agentID, ids, initial)
	return r, err
}
