package main

import (
	"github.com/prometheus/client_golang/prometheus"

	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// firestoreMetrics exports the Firestore store's transaction counters
// (fsstore.Stats, read at every scrape) as Prometheus counters: what to
// watch on a hot entitlement (docs/operations.md).
func firestoreMetrics(stats func() fsstore.Stats) []prometheus.Collector {
	counter := func(name, help string, labels prometheus.Labels, v func(fsstore.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels},
			func() float64 { return float64(v(stats())) })
	}
	const (
		batches = "Committed batch transactions of the Firestore store, on entitlements and on escrow leases."
		retries = "Firestore transaction attempts retried for contention: aborted, aborted after the emulator's lock timeout, or an optimistic read gone stale or torn before its commit (stale_read)."
	)
	return []prometheus.Collector{
		counter("stipend_firestore_batches_total", batches, prometheus.Labels{"on": "entitlement"},
			func(s fsstore.Stats) int64 { return s.Batches }),
		counter("stipend_firestore_batches_total", batches, prometheus.Labels{"on": "lease"},
			func(s fsstore.Stats) int64 { return s.LeaseBatches }),
		counter("stipend_firestore_retries_total", retries, prometheus.Labels{"reason": "aborted"},
			func(s fsstore.Stats) int64 { return s.Aborts - s.LockTimeouts }),
		counter("stipend_firestore_retries_total", retries, prometheus.Labels{"reason": "lock_timeout"},
			func(s fsstore.Stats) int64 { return s.LockTimeouts }),
		counter("stipend_firestore_retries_total", retries, prometheus.Labels{"reason": "stale_read"},
			func(s fsstore.Stats) int64 { return s.Conflicts }),
		counter("stipend_firestore_lease_takes_total", "Escrow leases this instance took on hot entitlements.", nil,
			func(s fsstore.Stats) int64 { return s.Refills }),
		counter("stipend_firestore_lease_gathers_total", "Transactions that folded every escrow lease of an entitlement back into it.", nil,
			func(s fsstore.Stats) int64 { return s.Gathers }),
		counter("stipend_firestore_lease_expired_total", "Escrow leases this instance folded because their owner stopped renewing them (a crashed or stalled instance's share, freed).", nil,
			func(s fsstore.Stats) int64 { return s.Expired }),
	}
}
