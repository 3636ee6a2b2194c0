package conformance

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

var closeTests = []subtest{
	{"CloseAmongConsumes", closeAmongConsumes},
}

// closeAmongConsumes closes the store while callers charge one
// entitlement: every call returns (none hangs on a stopped lane), a call
// after Close is answered or refused as Unavailable (never Internal), no
// charge is lost or made twice (initial − final = what the stored
// consumptions charged, and every consumed answer is stored), a second
// Close is harmless, and no goroutine of the store's batching machinery
// (lanes, readers, lease refills) is left running.
func closeAmongConsumes(t *testing.T, s store.EntitlementStore, clock *Clock) {
	const initial = 1_000_000
	agent, e := agentWithCredits(t, s, initial, clock.Now())
	const callers = 16
	var (
		closed   atomic.Bool
		closeErr error
		charged  atomic.Int64
	)
	together(callers+1, func(c int) {
		if c == callers {
			time.Sleep(20 * time.Millisecond) // while the callers charge
			closeErr = s.Close()
			closed.Store(true)
			return
		}
		for j := 0; j < 200 && !(closed.Load() && j%10 == 9); j++ {
			res, err := s.CheckAndConsume(t.Context(), request(agent, fmt.Sprint("cl-", c, "-", j), 3))
			switch {
			case err == nil && res.Outcome == store.Consumed:
				charged.Add(3)
			case err != nil && store.CodeOf(err) != store.CodeUnavailable:
				t.Errorf("consume among a Close: %v, want an answer or Unavailable", err)
			}
		}
	})
	if closeErr != nil {
		t.Errorf("Close among consumes: %v", closeErr)
	}
	if err := s.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	var stored int64
	for _, c := range listAllConsumptions(t, s, agent, time.Time{}) {
		stored += c.Cost.Cents
	}
	final := getEntitlement(t, s, e.ID)
	if initial-final.Credits.Balance.Cents != stored || stored < charged.Load() {
		t.Errorf("after Close: balance %d of %d, stored consumptions %d, answered consumed %d; want initial − final = stored ≥ answered",
			final.Credits.Balance.Cents, initial, stored, charged.Load())
	}
	if left := storeGoroutines(2 * time.Second); left != "" {
		t.Errorf("goroutines of the store still running after Close:\n%s", left)
	}
}

// storeGoroutines waits up to wait for the goroutines of the stores'
// batching machinery to end, and returns the stacks of those still running.
func storeGoroutines(wait time.Duration) string {
	marks := []string{"store/internal/coalesce.(*Lanes", "store/firestore.(*Store).drainReads", "store/firestore.(*Store).refill", "store/firestore.(*Store).release"}
	deadline := time.Now().Add(wait)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			for _, m := range marks {
				if strings.Contains(g, m) {
					left = append(left, g)
					break
				}
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return strings.Join(left, "\n\n")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
