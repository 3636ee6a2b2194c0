package conformance

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// callsPerCaller is how many consumes each concurrent caller makes.
const callsPerCaller = 4

// optionCase is a case of RunConcurrencyTests that takes the seed and
// bounds of its options.
type optionCase struct {
	name string
	run  func(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions)
}

// withOptions returns the cases of tables as subtests run with opts.
func withOptions(opts ConcurrencyOptions, tables ...[]optionCase) []subtest {
	var out []subtest
	for _, table := range tables {
		for _, c := range table {
			out = append(out, subtest{c.name, func(t *testing.T, s store.EntitlementStore, clock *Clock) { c.run(t, s, clock, opts) }})
		}
	}
	return out
}

// hotTests are the cases of RunConcurrencyTests that share one entitlement
// among many callers.
var hotTests = []optionCase{
	{"HotCredits", hotCredits},
	{"HotQuota", hotQuota},
	{"RevokeDuringConsumes", revokeDuringConsumes},
}

// revokeDuringConsumes revokes an entitlement while callers charge it: the
// revocation must neither undo nor lose a charge (initial − final balance
// equals what the stored consumptions charged), and nothing is charged
// after it.
func revokeDuringConsumes(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
	const initial = 1_000_000
	agent := newAgent()
	callers := max(minCallers, opts.MaxCallers/4)
	e := createEntitlement(t, s, credits(agent, initial, clock.Now()))
	var revokeErr error
	together(callers+1, func(c int) {
		if c == callers {
			_, revokeErr = s.RevokeEntitlement(t.Context(), e.ID)
			for try := 0; try < 3 && store.CodeOf(revokeErr) == store.CodeUnavailable; try++ {
				_, revokeErr = s.RevokeEntitlement(t.Context(), e.ID) // contention: retrying is safe
			}
			return
		}
		for j := range callsPerCaller {
			// Outcomes vary with the moment of the revocation; the stored
			// state below is what is checked.
			_, _ = s.CheckAndConsume(t.Context(), request(agent, fmt.Sprint("rv-", c, "-", j), 7))
		}
	})
	if revokeErr != nil {
		t.Fatalf("seed %d: RevokeEntitlement during consumes: %v", opts.Seed, revokeErr)
	}
	final := getEntitlement(t, s, e.ID)
	var charged int64
	for _, c := range listAllConsumptions(t, s, agent, time.Time{}) {
		charged += c.Cost.Cents
	}
	if final.Status != entitlement.StatusRevoked || initial-final.Credits.Balance.Cents != charged {
		t.Errorf("seed %d: after a revocation among consumes: status %s, balance %d of %d, stored consumptions charged %d; want revoked and initial − final = charged",
			opts.Seed, final.Status, final.Credits.Balance.Cents, initial, charged)
	}
	if res := checkAndConsume(t, s, request(agent, "rv-after", 7)); res.Outcome != store.Denied {
		t.Errorf("seed %d: consume after the revocation = %s, want %s", opts.Seed, res.Outcome, store.Denied)
	}
}

// hotCredits: MaxCallers callers charge one credits entitlement holding
// exactly what they spend; every call is consumed, none errs or is denied.
func hotCredits(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 1<<32))
	agent := newAgent()
	n := opts.MaxCallers * callsPerCaller
	costs := make([]int64, n)
	var total int64
	for i := range costs {
		costs[i] = 1 + rng.Int64N(5)
		total += costs[i]
	}
	e := createEntitlement(t, s, credits(agent, total, clock.Now()))
	results := make([]store.ConsumeResult, n)
	errs := make([]error, n)
	together(opts.MaxCallers, func(c int) {
		for j := range callsPerCaller {
			i := c*callsPerCaller + j
			results[i], errs[i] = s.CheckAndConsume(t.Context(), request(agent, fmt.Sprint("hot-", i), costs[i]))
		}
	})
	after := map[int64]bool{}
	for i, res := range results {
		if errs[i] != nil || res.Outcome != store.Consumed {
			t.Errorf("seed %d: hot credits call %d = %s %v, error %v; want consumed (the balance covers every call)", opts.Seed, i, res.Outcome, res.Denials, errs[i])
			continue
		}
		b := res.Consumption.BalanceAfter.Cents
		if b < 0 || after[b] {
			t.Errorf("seed %d: hot credits call %d: balanceAfter %d is negative or repeats another call's: charges were not serialised", opts.Seed, i, b)
		}
		after[b] = true
	}
	if got := getEntitlement(t, s, e.ID).Credits.Balance; got != usd(0) {
		t.Errorf("seed %d: hot credits final balance = %v, want 0 USD (initial %d − charged %d)", opts.Seed, got, total, total)
	}
	if n := depletedEvents(t, s, e.ID); n != 1 {
		t.Errorf("seed %d: hot credits wrote %d entitlement.depleted events, want exactly 1 (by the call that emptied it)", opts.Seed, n)
	}
	wantDenied(t, s, request(agent, "hot-over", 1), entitlement.Denial{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance})
}

// hotQuota: MaxCallers callers use one quota whose limit is exactly their calls.
func hotQuota(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
	agent := newAgent()
	n := opts.MaxCallers * 2
	q := createEntitlement(t, s, quota(agent, int64(n), clock.Now()))
	errs := make([]error, n)
	outcomes := make([]store.Outcome, n)
	together(opts.MaxCallers, func(c int) {
		for j := range 2 {
			i := c*2 + j
			res, err := s.CheckAndConsume(t.Context(), request(agent, fmt.Sprint("q-", i), 0))
			outcomes[i], errs[i] = res.Outcome, err
		}
	})
	for i := range n {
		if errs[i] != nil || outcomes[i] != store.Consumed {
			t.Errorf("seed %d: hot quota call %d = %s, error %v; want consumed", opts.Seed, i, outcomes[i], errs[i])
		}
	}
	if got := getEntitlement(t, s, q.ID).Quota.Remaining; got != 0 {
		t.Errorf("seed %d: hot quota remaining = %d, want 0", opts.Seed, got)
	}
	if n := depletedEvents(t, s, q.ID); n != 1 {
		t.Errorf("seed %d: hot quota wrote %d entitlement.depleted events, want exactly 1 (by the call that used the last unit)", opts.Seed, n)
	}
}

// together runs f(0..n-1) on n goroutines released at once, and waits.
func together(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

// failures counts the calls of a race that failed.
func failures(errs []error) int {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	return n
}

// retryUnavailable retries, one at a time, the calls of a race that failed
// with an Unavailable error: the contract allows one under contention (the
// emulator's lock timeouts are one) and makes retrying safe, so each retry
// must succeed and agree with the others. Any other error fails the test.
// countTrue fails the test if any of errs (of the calls call names) is
// set, and otherwise returns how many of flags are true.
func countTrue(t *testing.T, call string, errs []error, flags []bool) int {
	t.Helper()
	count := 0
	for i, ok := range flags {
		if errs[i] != nil {
			t.Fatalf("%s #%d: %v", call, i, errs[i])
		}
		if ok {
			count++
		}
	}
	return count
}

// countConsumed returns how many of results consumed, and fails the test
// for any other that is not denied (by reason alone, when reason is set).
func countConsumed(t *testing.T, results []store.ConsumeResult, reason entitlement.Reason) int {
	t.Helper()
	for _, r := range results {
		switch {
		case r.Outcome == store.Consumed:
		case r.Outcome == store.Denied && (reason == "" || len(r.Denials) == 1 && r.Denials[0].Reason == reason):
		default:
			t.Errorf("outcome %s %v, want consumed or denied (by %q, when set)", r.Outcome, r.Denials, reason)
		}
	}
	return countOutcome(results, store.Consumed)
}

// countOutcome returns how many of results are want.
func countOutcome(results []store.ConsumeResult, want store.Outcome) int {
	n := 0
	for _, r := range results {
		if r.Outcome == want {
			n++
		}
	}
	return n
}

func retryUnavailable(t *testing.T, name string, errs []error, call func(i int)) {
	t.Helper()
	for i, err := range errs {
		if err == nil {
			continue
		}
		if store.CodeOf(err) != store.CodeUnavailable {
			t.Errorf("%s #%d: %v, want success (or an Unavailable error to retry)", name, i, err)
			continue
		}
		t.Logf("%s #%d: %v; retrying", name, i, err)
		call(i)
		if errs[i] != nil {
			t.Errorf("%s #%d retried after contention: %v", name, i, errs[i])
		}
	}
}

// firstOK returns the index of the first call that succeeded, failing the
// test if none did.
func firstOK(t *testing.T, errs []error) int {
	t.Helper()
	for i, err := range errs {
		if err == nil {
			return i
		}
	}
	t.Fatalf("every concurrent call failed")
	return 0
}
