// Package loadgen drives a benchmark's calls from concurrent callers and
// measures each: the bench commands (cmd/consumebench, cmd/storebench)
// share it. Only those commands import it.
package loadgen

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
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
