package postgres_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
	"github.com/stipend-mcp/stipend/usage"
)

// BenchmarkUsage measures Usage on PostgreSQL over the data of the
// Firestore store's BenchmarkUsage (STIPEND_BENCH_USAGE consumptions of
// one agent across 30 days, 5 services of 4 tools, 80 % credits and 20 %
// quota, every 20th refunded), seeded by one INSERT … SELECT; without the
// variable it skips.
//
//	STIPEND_BENCH_USAGE=100000 scripts/test -run '^$' -bench BenchmarkUsage -benchtime 20x ./store/postgres/
func BenchmarkUsage(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv("STIPEND_BENCH_USAGE"))
	if n <= 0 {
		b.Skip("set STIPEND_BENCH_USAGE to the number of consumptions to seed (docs/BENCHMARKS.md uses 100000)")
	}
	cfg := migrated(b)
	pool := pgtest.Open(b, cfg, 8)
	s := postgres.New(pool)
	ctx := b.Context()
	agent := "bench-agent"
	from := time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC)
	to := from.Add(30 * 24 * time.Hour)
	credits := entitlement.Entitlement{ID: uuid.NewString(), AgentID: agent, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: entitlement.AnyService}, CreatedAt: from,
		Credits: entitlement.Credits{Balance: money.Money{Cents: 1 << 40, Currency: "USD"}}}
	quota := entitlement.Entitlement{ID: uuid.NewString(), AgentID: agent, Type: entitlement.TypeQuota,
		Scope: entitlement.Scope{Service: entitlement.AnyService}, CreatedAt: from,
		Quota: entitlement.Quota{Limit: 1 << 30, Remaining: 1 << 30, Period: entitlement.PeriodMonth, Anchor: from,
			ResetAt: entitlement.PeriodMonth.NextBoundary(from, from)}}
	for _, e := range []entitlement.Entitlement{credits, quota} {
		if _, err := s.CreateEntitlement(ctx, e); err != nil {
			b.Fatal(err)
		}
	}
	start := time.Now()
	_, err := pool.Exec(ctx, `INSERT INTO consumptions (id, agent_id, idempotency_key, entitlement_id, entitlement_type,
		service, tool, cost_cents, cost_currency, units, occurred_at, fingerprint,
		refund_cost_cents, refund_cost_currency, refund_units, refunded_at)
	SELECT 'c' || i, $1, 'k' || i, CASE WHEN q THEN $3 ELSE $2 END, CASE WHEN q THEN 'quota' ELSE 'credits' END,
		'svc-' || i % 5, 'tool-' || i / 5 % 4, CASE WHEN q THEN 0 ELSE 1 + i % 100 END, CASE WHEN q THEN '' ELSE 'USD' END,
		CASE WHEN q THEN 1 + i % 3 ELSE 1 END, at, 'bench',
		CASE WHEN r AND NOT q THEN 1 + i % 100 END, CASE WHEN r AND NOT q THEN 'USD' END,
		CASE WHEN r THEN CASE WHEN q THEN 1 + i % 3 ELSE 1 END END, CASE WHEN r THEN at END
	FROM (SELECT i, i % 5 = 4 AS q, i % 20 = 3 AS r,
		date_trunc('microseconds', $4::timestamptz + (i * ($5::bigint / $6::bigint)) * interval '1 microsecond') AS at
		FROM generate_series(0, $6::bigint - 1) AS i) AS g`,
		agent, credits.ID, quota.ID, from, to.Sub(from).Microseconds(), n)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `VACUUM ANALYZE consumptions`); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d consumptions in %s", n, time.Since(start).Round(time.Millisecond))
	for _, tc := range []struct {
		name     string
		groupBy  usage.GroupBy
		allPages bool
	}{
		{"tool", usage.ByTool, false}, {"service", usage.ByService, false},
		{"day", usage.ByDay, false}, {"hour", usage.ByHour, false}, {"hour-all-pages", usage.ByHour, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q := usage.Query{AgentID: agent, From: from, To: to, GroupBy: tc.groupBy}
			var buckets, count int64
			for b.Loop() {
				buckets, count = 0, 0
				cursor := ""
				for {
					items, next, err := s.Usage(b.Context(), q, store.Page{Cursor: cursor})
					if err != nil {
						b.Fatalf("Usage(%s): %v", tc.groupBy, err)
					}
					for _, it := range items {
						buckets++
						count += it.Count
					}
					if next == "" || !tc.allPages {
						break
					}
					cursor = next
				}
			}
			if tc.allPages && count != int64(n) {
				b.Fatalf("Usage(%s, every page) counted %d consumptions, want %d", tc.groupBy, count, n)
			}
			b.ReportMetric(float64(buckets), "buckets/op")
		})
	}
}
