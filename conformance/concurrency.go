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
}
