package main

import (
	"fmt"
	"io"
	"slices"
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
