package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// result is one scenario's measurement.
type result struct {
	store, path         string
	callers, ents, want int
	ok, failed          int
	wall                time.Duration
	latencies           []time.Duration
	balance             string // "exact", or what is wrong
	firstErr            string
}

// load is what drive measured.
type load struct {
	ok, failed int
	wall       time.Duration
	latencies  []time.Duration
	firstErr   string
}

// drive runs calls calls from callers goroutines, each taking the next
// index, until all are done or ctx ends (the rest are not run).
func drive(ctx context.Context, callers, calls int, call func(context.Context, int) error) load {
	var next atomic.Int64
	var mu sync.Mutex
	var l load
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
				l.latencies = append(l.latencies, d)
				if err != nil {
					l.failed++
					if l.firstErr == "" {
						l.firstErr = err.Error()
					}
				} else {
					l.ok++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	l.wall = time.Since(begin)
	return l
}

func (r *result) rate() float64 { return float64(r.ok) / r.wall.Seconds() }

func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(p*float64(len(s)-1))]
}

// printTable prints every result, and each one's throughput against the
// bare UPDATE … RETURNING baseline of the same shape (callers and
// entitlements) in this run.
func printTable(out io.Writer, rs []result) {
	type shape struct{ callers, ents int }
	bare := map[shape]float64{}
	for i := range rs {
		if rs[i].path == pathBare {
			bare[shape{rs[i].callers, rs[i].ents}] = rs[i].rate()
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "store\tpath\tcallers\tents\tcalls\tok\tfailed\tnot run\twall\tok/s\tp50\tp99\tbalance\t× bare\t")
	for i := range rs {
		r := &rs[i]
		x := "-"
		if b := bare[shape{r.callers, r.ents}]; b > 0 && r.path != pathBare {
			x = fmt.Sprintf("%.2f×", r.rate()/b)
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.2fs\t%.0f\t%s\t%s\t%s\t%s\t\n",
			r.store, r.path, r.callers, r.ents, r.want, r.ok, r.failed, r.want-r.ok-r.failed,
			r.wall.Seconds(), r.rate(), ms(percentile(r.latencies, 0.50)), ms(percentile(r.latencies, 0.99)), r.balance, x)
	}
	w.Flush()
	for i := range rs {
		if rs[i].firstErr != "" {
			fmt.Fprintf(out, "\nfirst error of %s / %s: %s", rs[i].store, rs[i].path, truncate(rs[i].firstErr, 200))
		}
	}
	fmt.Fprintln(out)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1fms", float64(d.Microseconds())/1000) }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}
