package firestore_test

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/usage"
)

// usageBenchEnv names the number of consumptions BenchmarkUsage seeds;
// without it the benchmark skips, so no test command runs it by accident.
const usageBenchEnv = "STIPEND_BENCH_USAGE"

// usageBench is the seeded store, shared by the sub-benchmarks.
var usageBench struct {
	once     sync.Once
	s        *fsstore.Store
	agent    string
	from, to time.Time
	err      error
}

// BenchmarkUsage measures Usage over the consumptions of one agent across
// 30 days: 5 services of 4 tools, 80 % on credits (USD, 1–100 cents) and
// 20 % on a quota (1–3 units), every 20th refunded. They are seeded once,
// through a BulkWriter straight into the emulator (not the charge path).
// Each groupBy reads its first page (day, tool and service: every bucket;
// hour: 100 of 720) and hour-all-pages every page. The baseline, in the same
// run, is one count aggregation over the agent's whole range: what
// touching every consumption once costs.
//
//	STIPEND_BENCH_USAGE=100000 scripts/test -run '^$' -bench BenchmarkUsage -benchtime 3x ./store/firestore/
func BenchmarkUsage(b *testing.B) {
	n, _ := strconv.Atoi(os.Getenv(usageBenchEnv))
	if n <= 0 {
		b.Skipf("set %s to the number of consumptions to seed (docs/BENCHMARKS.md uses 100000)", usageBenchEnv)
	}
	emulator.Host(b)
	u := &usageBench
	u.once.Do(func() { u.err = seedUsageBench(b, n) })
	if u.err != nil {
		b.Fatal(u.err)
	}
	b.Run("baseline-count", func(b *testing.B) {
		q := emulator.Client(b).Collection(usageBenchPrefix+"consumptions").
			Where("agentId", "==", u.agent).Where("occurredAt", ">=", u.from).Where("occurredAt", "<", u.to)
		for b.Loop() {
			res, err := q.NewAggregationQuery().WithCount("n").Get(b.Context())
			if err != nil || res["n"] == nil {
				b.Fatalf("count: %v, %v", res, err)
			}
		}
	})
	for _, tc := range []struct {
		name     string
		groupBy  usage.GroupBy
		allPages bool
	}{
		{"tool", usage.ByTool, false}, {"service", usage.ByService, false},
		{"day", usage.ByDay, false}, {"hour", usage.ByHour, false}, {"hour-all-pages", usage.ByHour, true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			q := usage.Query{AgentID: u.agent, From: u.from, To: u.to, GroupBy: tc.groupBy}
			var buckets, count int64
			for b.Loop() {
				buckets, count = 0, 0
				cursor := ""
				for {
					items, next, err := u.s.Usage(b.Context(), q, store.Page{Cursor: cursor})
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

// usageBenchPrefix is the collection prefix of the seeded store.
var usageBenchPrefix = "usagebench-" + uuid.NewString()[:8] + "-"

func seedUsageBench(b *testing.B, n int) error {
	u := &usageBench
	ctx := b.Context()
	u.s = fsstore.New(emulator.Client(b), fsstore.WithCollectionPrefix(usageBenchPrefix))
	u.agent = "bench-agent"
	u.from = time.Date(2026, time.March, 1, 0, 0, 0, 0, time.UTC)
	u.to = u.from.Add(30 * 24 * time.Hour)
	credits := entitlement.Entitlement{ID: uuid.NewString(), AgentID: u.agent, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: entitlement.AnyService}, CreatedAt: u.from,
		Credits: entitlement.Credits{Balance: money.Money{Cents: 1 << 40, Currency: "USD"}}}
	quota := entitlement.Entitlement{ID: uuid.NewString(), AgentID: u.agent, Type: entitlement.TypeQuota,
		Scope: entitlement.Scope{Service: entitlement.AnyService}, CreatedAt: u.from,
		Quota: entitlement.Quota{Limit: 1 << 30, Remaining: 1 << 30, Period: entitlement.PeriodMonth, Anchor: u.from,
			ResetAt: entitlement.PeriodMonth.NextBoundary(u.from, u.from)}}
	for _, e := range []entitlement.Entitlement{credits, quota} {
		if _, err := u.s.CreateEntitlement(ctx, e); err != nil {
			return err
		}
	}
	step := u.to.Sub(u.from) / time.Duration(n)
	cs := make([]entitlement.Consumption, n)
	for i := range cs {
		c := entitlement.Consumption{ID: uuid.NewString(), AgentID: u.agent, EntitlementID: credits.ID,
			EntitlementType: entitlement.TypeCredits, Service: fmt.Sprint("svc-", i%5), Tool: fmt.Sprint("tool-", i/5%4),
			IdempotencyKey: fmt.Sprint("k", i), Units: 1, OccurredAt: u.from.Add(time.Duration(i) * step).Truncate(time.Microsecond),
			Fingerprint: "bench"}
		if i%5 == 4 {
			c.EntitlementID, c.EntitlementType, c.Units = quota.ID, entitlement.TypeQuota, int64(1+i%3)
		} else {
			c.Cost = money.Money{Cents: int64(1 + i%100), Currency: "USD"}
		}
		if i%20 == 3 {
			c.Refund = &entitlement.Refund{Charge: entitlement.Charge{Cost: c.Cost, Units: c.Units}, RefundedAt: c.OccurredAt}
		}
		cs[i] = c
	}
	start := time.Now()
	if err := fsstore.SeedConsumptions(ctx, u.s, cs); err != nil {
		return err
	}
	b.Logf("seeded %d consumptions in %s", n, time.Since(start).Round(time.Millisecond))
	return nil
}
