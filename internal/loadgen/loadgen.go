// Package loadgen drives a benchmark's calls from concurrent callers,
// measures each, and checks the balances they leave: the bench commands (cmd/consumebench, cmd/storebench)
// share it. Only those commands import it.
package loadgen

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// Load is what Drive measured.
type Load struct {
	OK, Failed int
	Wall       time.Duration
	// Latencies has one entry per call made, in the order they ended.
	Latencies []time.Duration
	// FirstErr is the first failed call's error, or "".
	FirstErr string
}

// Drive runs calls calls from callers goroutines, each taking the next
// index, until all are done or ctx ends (the rest are not run).
func Drive(ctx context.Context, callers, calls int, call func(context.Context, int) error) Load {
	var next atomic.Int64
	var mu sync.Mutex
	var l Load
	var wg sync.WaitGroup
	begin := time.Now()
	for range callers {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= calls || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				err := call(ctx, i)
				d := time.Since(t0)
				mu.Lock()
				l.Latencies = append(l.Latencies, d)
				if err != nil {
					l.Failed++
					if l.FirstErr == "" {
						l.FirstErr = err.Error()
					}
				} else {
					l.OK++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	l.Wall = time.Since(begin)
	return l
}

// CheckBalances compares each of agent's credits entitlements ids, read
// from s, with its initial balance less what the consumptions stored for it
// charged (a captured hold is one), and checks that nothing is still held.
// It answers "exact", or what is wrong.
func CheckBalances(ctx context.Context, s store.EntitlementStore, agent string, ids []string, initial int64) (string, error) {
	charged := map[string]int64{}
	for cursor := ""; ; {
		page, next, err := s.ListConsumptions(ctx, agent, time.Time{}, store.Page{Cursor: cursor})
		if err != nil {
			return "", err
		}
		for _, c := range page {
			charged[c.EntitlementID] += c.Cost.Cents
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for _, id := range ids {
		e, err := s.GetEntitlement(ctx, id)
		if err != nil {
			return "", err
		}
		if got, want := e.Credits.Balance.Cents, initial-charged[id]; got != want {
			return fmt.Sprintf("WRONG: %s has %d, want %d", id, got, want), nil
		}
		if e.Credits.Held.Cents != 0 {
			return fmt.Sprintf("WRONG: %s still holds %d", id, e.Credits.Held.Cents), nil
		}
	}
	return "exact", nil
}
