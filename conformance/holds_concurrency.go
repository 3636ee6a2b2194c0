package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// holdConcurrencyTests are the cases of RunConcurrencyTests on holds.
var holdConcurrencyTests = []optionCase{
	{"HoldsHotCredits", holdsHotCredits},
	{"HoldsCaptureReleaseRace", captureReleaseRace},
	{"HoldsAuthorizeSameKey", authorizeSameKey},
}

// holdsHotCredits: MaxCallers callers each authorize and capture
// callsPerCaller times on one credits entitlement that covers every hold at
// once; each capture charges a random amount up to its hold. Every call
// succeeds, and the balance falls by exactly what was captured.
func holdsHotCredits(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 2<<32))
	agent := newAgent()
	n := opts.MaxCallers * callsPerCaller
	maxes, actuals := make([]int64, n), make([]int64, n)
	var total, spent int64
	for i := range n {
		maxes[i] = 1 + rng.Int64N(5)
		actuals[i] = rng.Int64N(maxes[i] + 1)
		total += maxes[i]
		spent += actuals[i]
	}
	e := createEntitlement(t, s, credits(agent, total, clock.Now()))
	holds := make([]store.HoldResult, n)
	captures := make([]store.HoldResult, n)
	authErrs, capErrs := make([]error, n), make([]error, n)
	capture := func(i int) {
		captures[i], capErrs[i] = s.CaptureHold(t.Context(), holds[i].Hold.ID, agent, entitlement.Amount{Cost: ptr(usd(actuals[i]))})
	}
	together(opts.MaxCallers, func(c int) {
		for j := range callsPerCaller {
			i := c*callsPerCaller + j
			holds[i], authErrs[i] = s.Authorize(t.Context(), holdRequest(agent, fmt.Sprint("hh-", i), maxes[i]))
			if authErrs[i] == nil && holds[i].Outcome == store.Held {
				capture(i)
			}
		}
	})
	for i := range n {
		if authErrs[i] != nil || holds[i].Outcome != store.Held {
			t.Fatalf("seed %d: hot hold %d = %s %v, error %v; want held (the balance covers every hold)", opts.Seed, i, holds[i].Outcome, holds[i].Denials, authErrs[i])
		}
	}
	retryUnavailable(t, "CaptureHold", capErrs, capture)
	for i, res := range captures {
		if capErrs[i] == nil && ((res.Outcome != store.Captured && res.Outcome != store.Replay) || res.Consumption.Cost != usd(actuals[i])) {
			t.Errorf("seed %d: capture %d = %s of %v, want captured of %d cents", opts.Seed, i, res.Outcome, res.Consumption.Cost, actuals[i])
		}
	}
	wantHeld(t, s, e.ID, 0, total-spent)
	var charged int64
	stored := listConsumptionPages(t, s, agent, time.Time{}, store.MaxPageSize)
	for _, c := range stored {
		charged += c.Cost.Cents
	}
	if len(stored) != n || charged != spent {
		t.Errorf("seed %d: %d stored consumptions charging %d, want %d charging %d", opts.Seed, len(stored), charged, n, spent)
	}
}

// captureReleaseRace: callers capture and release the same holds at once;
// of each hold's callers exactly one ends it, and the others agree.
func captureReleaseRace(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
	const holds = 8
	perHold := max(2, opts.MaxCallers/holds)
	agent, e := agentWithCredits(t, s, 1000, clock.Now())
	hs := make([]entitlement.Hold, holds)
	for i := range hs {
		hs[i] = mustAuthorize(t, s, holdRequest(agent, fmt.Sprint("race-", i), 100)).Hold
	}
	n := holds * perHold
	results, errs := make([]store.HoldResult, n), make([]error, n)
	call := func(i int) {
		h := hs[i/perHold]
		if i%2 == 0 {
			results[i], errs[i] = s.CaptureHold(t.Context(), h.ID, agent, entitlement.Amount{Cost: ptr(usd(40))})
		} else {
			results[i], errs[i] = s.ReleaseHold(t.Context(), h.ID, agent)
		}
	}
	together(n, call)
	// A loser's answer is a Conflict error; only Unavailable ones are retried.
	retry := make([]error, n)
	keep := func(i int) {
		if store.CodeOf(errs[i]) != store.CodeConflict {
			retry[i] = errs[i]
		} else {
			retry[i] = nil
		}
	}
	for i := range errs {
		keep(i)
	}
	retryUnavailable(t, "capture or release", retry, func(i int) { call(i); keep(i) })
	var captured int64
	for h := range hs {
		won := 0
		for i := h * perHold; i < (h+1)*perHold; i++ {
			if o := results[i].Outcome; errs[i] == nil && (o == store.Captured || o == store.Released) {
				won++
			}
		}
		status := getHold(t, s, hs[h].ID).Status
		if won != 1 || (status != entitlement.HoldCaptured && status != entitlement.HoldReleased) {
			t.Errorf("seed %d: hold %d: %d callers ended it, and it is %s; want exactly one, captured or released", opts.Seed, h, won, status)
			continue
		}
		if status == entitlement.HoldCaptured {
			captured += 40
		}
		// The winner's kind decides every other answer.
		for i := h * perHold; i < (h+1)*perHold; i++ {
			kind, mine := "release", entitlement.HoldReleased
			if i%2 == 0 {
				kind, mine = "capture", entitlement.HoldCaptured
			}
			got := string(results[i].Outcome)
			if errs[i] != nil {
				got = "error " + string(store.CodeOf(errs[i]))
			}
			want := []string{"error " + string(store.CodeConflict)}
			if status == mine {
				want = []string{string(store.Captured), string(store.Released), string(store.Replay)}
			}
			if !slices.Contains(want, got) {
				t.Errorf("seed %d: hold %d ended %s, but a %s answered %s, want one of %v", opts.Seed, h, status, kind, got, want)
			}
		}
	}
	wantHeld(t, s, e.ID, 0, 1000-captured)
}

// authorizeSameKey: callers send one key at once, half as a hold and half
// as a consume with the same price: exactly one call is made, and every
// other answer agrees with it.
func authorizeSameKey(t *testing.T, s store.EntitlementStore, clock *Clock, opts ConcurrencyOptions) {
	agent, e := agentWithCredits(t, s, 1000, clock.Now())
	n := max(minCallers, opts.MaxCallers/2)
	outcomes, holdIDs, errs := make([]store.Outcome, n), make([]string, n), make([]error, n)
	together(n, func(i int) {
		if i%2 == 0 {
			res, err := s.Authorize(t.Context(), holdRequest(agent, "one", 100))
			outcomes[i], holdIDs[i], errs[i] = res.Outcome, res.Hold.ID, err
		} else {
			res, err := s.CheckAndConsume(t.Context(), request(agent, "one", 100))
			outcomes[i], errs[i] = res.Outcome, err
		}
	})
	count := map[store.Outcome]int{}
	for i, o := range outcomes {
		if errs[i] != nil {
			t.Fatalf("seed %d: call %d on one key: %v", opts.Seed, i, errs[i])
		}
		count[o]++
	}
	if count[store.Held]+count[store.Consumed] != 1 {
		t.Fatalf("seed %d: one key sent %d times: %d held, %d consumed; want exactly one call made", opts.Seed, n, count[store.Held], count[store.Consumed])
	}
	holdWon := count[store.Held] == 1
	var holdID string
	for i, o := range outcomes {
		isHold := i%2 == 0
		switch {
		case isHold == holdWon && o != store.Held && o != store.Consumed && o != store.Replay,
			isHold != holdWon && o != store.Conflict:
			t.Errorf("seed %d: call %d (hold %v) = %s, but a %s won", opts.Seed, i, isHold, o, map[bool]string{true: "hold", false: "consume"}[holdWon])
		}
		if isHold && holdWon && (o == store.Held || o == store.Replay) {
			if holdID != "" && holdIDs[i] != holdID {
				t.Errorf("seed %d: one key answered holds %s and %s", opts.Seed, holdID, holdIDs[i])
			}
			holdID = holdIDs[i]
		}
	}
	if holdWon {
		wantHeld(t, s, e.ID, 100, 1000)
	} else {
		wantHeld(t, s, e.ID, 0, 900)
	}
}
