package conformance

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// ConcurrencyOptions tunes RunConcurrencyTests.
type ConcurrencyOptions struct {
	Seed       int64 // 0: random; the seed is printed (t.Logf) and in every failure message
	Rounds     int   // rounds of the property test; 0: a default suited to the memory store
	MaxCallers int   // upper bound of concurrent callers, 4..64; 0: 64
}

// Defaults of ConcurrencyOptions.
const (
	defaultRounds     = 30
	defaultMaxCallers = 64
	minCallers        = 4
	// callsPerCaller is how many consumes each concurrent caller makes.
	callsPerCaller = 4
)

func (o ConcurrencyOptions) withDefaults() ConcurrencyOptions {
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	if o.Rounds <= 0 {
		o.Rounds = defaultRounds
	}
	if o.MaxCallers == 0 {
		o.MaxCallers = defaultMaxCallers
	}
	o.MaxCallers = min(max(o.MaxCallers, minCallers), defaultMaxCallers)
	return o
}

// RunConcurrencyTests runs the concurrency and property suite: rounds of
// 4..MaxCallers concurrent callers with duplicate keys, mixed entitlement
// kinds and random costs, with the invariants of CheckAndConsume checked
// after every round, and hot entitlements that MaxCallers callers share.
// Run it under -race. A failure names the seed; rerun with
// ConcurrencyOptions{Seed: seed} to reproduce the same rounds.
func RunConcurrencyTests(t *testing.T, newStore NewStore, opts ConcurrencyOptions) {
	t.Helper()
	opts = opts.withDefaults()
	t.Logf("conformance: concurrency seed %d (reproduce with ConcurrencyOptions{Seed: %d})", opts.Seed, opts.Seed)
	t.Run("Property", func(t *testing.T) {
		t.Parallel()
		for round := range opts.Rounds {
			p := &property{t: t, seed: opts.Seed, round: round, rng: rand.New(rand.NewPCG(uint64(opts.Seed), uint64(round)))}
			clock := NewClock()
			p.run(newStore(t, clock.Now), clock, opts.MaxCallers)
			if t.Failed() {
				return // one failing round is enough to read
			}
		}
	})
	t.Run("HotCredits", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		hotCredits(t, newStore(t, clock.Now), clock, opts)
	})
	t.Run("HotQuota", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		hotQuota(t, newStore(t, clock.Now), clock, opts)
	})
	t.Run("RevokeDuringConsumes", func(t *testing.T) {
		t.Parallel()
		clock := NewClock()
		revokeDuringConsumes(t, newStore(t, clock.Now), clock, opts)
	})
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
