package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/usage"
)

// usageTests are the cases of store.UsageReader: the balance of an agent
// (every kind and state of entitlement, holds, lazy resets) and its usage
// in every grouping, page by page, against usage.Query.Aggregate over the
// agent's listed consumptions.
var usageTests = []subtest{
	{"BalanceEmpty", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		got, err := s.Balance(t.Context(), agent)
		if err != nil {
			t.Fatalf("Balance(unknown agent): %v", err)
		}
		want := entitlement.Balance{AgentID: agent, AsOf: clock.Now()}
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("Balance(unknown agent) (-want +got):\n%s", d)
		}
	}},
	{"Balance", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		start := clock.Now()
		c1 := createEntitlement(t, s, credits(agent, 1000, start))
		createEntitlement(t, s, credits(agent, 500, start))
		eur := credits(agent, 300, start)
		eur.Credits = entitlement.Credits{Balance: money.Money{Cents: 300, Currency: "EUR"}, Granted: money.Money{Cents: 300, Currency: "EUR"}}
		createEntitlement(t, s, eur)
		revoked := createEntitlement(t, s, credits(agent, 999, start))
		revoke(t, s, revoked.ID)
		expiring := credits(agent, 777, start)
		expiring.ExpiresAt = ptr(start.Add(time.Hour))
		createEntitlement(t, s, expiring)
		q1 := createEntitlement(t, s, quota(agent, 10, start))
		q2 := quota(agent, 5, start.Add(-12*time.Hour)) // resets 12 hours before q1, then 12 after
		createEntitlement(t, s, q2)
		anyQuota := quota(agent, 7, start)
		anyQuota.Scope = entitlement.Scope{Service: entitlement.AnyService}
		createEntitlement(t, s, anyQuota)
		sub := createEntitlement(t, s, subscription(agent, start))
		forever := subscription(agent, start)
		forever.Subscription.ValidUntil = nil
		forever = createEntitlement(t, s, forever)
		ended := subscription(agent, start)
		ended.Subscription.ValidUntil = ptr(start.Add(time.Minute))
		createEntitlement(t, s, ended)

		// Spend on the quotas and credits, hold some; then move past the
		// expiries and q2's reset (but not q1's).
		for i := range 3 {
			mustConsume(t, s, entitlement.ConsumeRequest{AgentID: agent, Service: testService, Tool: testTool,
				IdempotencyKey: fmt.Sprint("q1-", i), EntitlementID: q1.ID})
			mustConsume(t, s, entitlement.ConsumeRequest{AgentID: agent, Service: testService, Tool: testTool,
				IdempotencyKey: fmt.Sprint("q2-", i), EntitlementID: q2.ID})
		}
		spend := request(agent, "c1", 100)
		spend.EntitlementID = c1.ID
		mustConsume(t, s, spend)
		hold := holdRequest(agent, "h1", 250)
		hold.EntitlementID, hold.TTL = c1.ID, 24*time.Hour
		mustAuthorize(t, s, hold)
		qhold := entitlement.HoldRequest{ConsumeRequest: entitlement.ConsumeRequest{AgentID: agent, Service: testService, Tool: testTool,
			IdempotencyKey: "qh", EntitlementID: q1.ID, Units: 2}, TTL: 24 * time.Hour}
		mustAuthorize(t, s, qhold)
		now := clock.Advance(13 * time.Hour)

		got, err := s.Balance(t.Context(), agent)
		if err != nil {
			t.Fatalf("Balance: %v", err)
		}
		q1Reset := getEntitlement(t, s, q1.ID).Quota.ResetAt
		q2Reset := getEntitlement(t, s, q2.ID).Quota.ResetAt
		if !q1Reset.Before(q2Reset) || !q1Reset.After(now) {
			t.Fatalf("fixture: q1 resets at %s, q2 at %s; want q1 first, after %s", q1Reset, q2Reset, now)
		}
		want := entitlement.Balance{
			AgentID: agent, AsOf: now,
			Credits: []entitlement.CreditsBalance{
				{Currency: "EUR", Total: money.Money{Cents: 300, Currency: "EUR"}, Held: money.Money{Currency: "EUR"},
					Available: money.Money{Cents: 300, Currency: "EUR"}, Entitlements: 1},
				{Currency: "USD", Total: usd(1400), Held: usd(250), Available: usd(1150), Entitlements: 2},
			},
			Quotas: []entitlement.QuotaBalance{
				{Service: entitlement.AnyService, Limit: 7, Remaining: 7, Available: 7, NextResetAt: getEntitlement(t, s, anyQuota.ID).Quota.ResetAt, Entitlements: 1},
				// q2 was reset lazily (5 left); q1 still has 10 − 3, 2 of them held.
				{Service: testService, Limit: 15, Remaining: 12, Held: 2, Available: 10, NextResetAt: q1Reset, Entitlements: 2},
			},
			Subscriptions: []entitlement.SubscriptionBalance{
				{EntitlementID: sub.ID, Scope: sub.Scope, ValidFrom: start, EndsAt: sub.Subscription.ValidUntil},
				{EntitlementID: forever.ID, Scope: forever.Scope, ValidFrom: start},
			},
		}
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("Balance (-want +got):\n%s", d)
		}
	}},
	{"Usage", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		f := seedUsage(t, s, clock)
		ny, err := time.LoadLocation("America/New_York")
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []usage.GroupBy{usage.ByTool, usage.ByService, usage.ByHour, usage.ByDay} {
			for _, loc := range []*time.Location{time.UTC, ny} {
				for _, r := range [][2]time.Time{{f.from, f.to}, {f.from.Add(90 * time.Minute), f.to.Add(-time.Hour)}} {
					q := usage.Query{AgentID: f.agent, From: r[0], To: r[1], GroupBy: g, Location: loc}
					name := fmt.Sprintf("Usage(%s in %s, [%s, %s))", g, loc, r[0].Format(time.RFC3339), r[1].Format(time.RFC3339))
					_, want := q.Aggregate(f.consumptions)
					if len(want) < 2 {
						t.Fatalf("%s: the fixture makes %d buckets, want 2 or more", name, len(want))
					}
					for _, limit := range []int{1, 2, store.MaxPageSize} {
						if d := cmpDiff(want, usagePages(t, s, q, limit)); d != "" {
							t.Errorf("%s in pages of %d (-want +got):\n%s", name, limit, d)
						}
					}
				}
			}
		}
		// One explicit answer, so the reference itself is checked: by
		// service over the whole range.
		q := usage.Query{AgentID: f.agent, From: f.from, To: f.to, GroupBy: usage.ByService}
		want := []usage.Bucket{
			{Service: "maps", Count: 2, Amounts: []money.Money{{Cents: 40, Currency: "EUR"}}},
			{Service: testService, Count: f.searchCount, Amounts: []money.Money{usd(f.searchCents)}, Units: f.searchUnits},
		}
		if d := cmpDiff(want, usagePages(t, s, q, store.MaxPageSize)); d != "" {
			t.Errorf("Usage(service, whole range) (-want +got):\n%s", d)
		}
	}},
	{"UsageWithoutSubscriptionsOrRefunds", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// Stores may count a bucket from its kinds of charge when no
		// subscription can add uncharged calls, and skip refund sums when
		// the range has none: the answer is the same.
		agent := newAgent()
		from := clock.Now()
		c := createEntitlement(t, s, credits(agent, 1000, from))
		q := createEntitlement(t, s, quota(agent, 100, from))
		for i := range 6 {
			r := request(agent, fmt.Sprint("c", i), int64(i+1))
			r.Tool, r.EntitlementID = []string{"a", "b"}[i%2], c.ID
			mustConsume(t, s, r)
			mustConsume(t, s, entitlement.ConsumeRequest{AgentID: agent, Service: testService, Tool: "a",
				IdempotencyKey: fmt.Sprint("q", i), EntitlementID: q.ID, Units: int64(i%3 + 1)})
			clock.Advance(95 * time.Minute)
		}
		cs := listAllConsumptions(t, s, agent, time.Time{})
		for _, g := range []usage.GroupBy{usage.ByTool, usage.ByService, usage.ByHour, usage.ByDay} {
			uq := usage.Query{AgentID: agent, From: from, To: clock.Now(), GroupBy: g, Location: time.UTC}
			_, want := uq.Aggregate(cs)
			if d := cmpDiff(want, usagePages(t, s, uq, 2)); d != "" {
				t.Errorf("Usage(%s) (-want +got):\n%s", g, d)
			}
		}
	}},
	{"UsageEmptyAndInvalid", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		now := clock.Now()
		q := usage.Query{AgentID: agent, From: now.Add(-time.Hour), To: now, GroupBy: usage.ByDay}
		items, next, err := s.Usage(t.Context(), q, store.Page{})
		if err != nil || len(items) != 0 || next != "" {
			t.Errorf("Usage(an agent with no consumption) = %v, %q, %v; want no bucket", items, next, err)
		}
		for _, tc := range []struct {
			name, field string
			mutate      func(q *usage.Query)
		}{
			{"FromAfterTo", "from", func(q *usage.Query) { q.From, q.To = q.To, q.From }},
			{"OverAYear", "to", func(q *usage.Query) { q.From = q.To.Add(-usage.MaxRange - time.Hour) }},
			{"BadGroupBy", "groupBy", func(q *usage.Query) { q.GroupBy = "week" }},
			{"HoursOverTooLong", "groupBy", func(q *usage.Query) {
				q.GroupBy, q.From = usage.ByHour, q.To.Add(-usage.MaxHourRange-time.Hour)
			}},
		} {
			bad := q
			tc.mutate(&bad)
			_, _, err := s.Usage(t.Context(), bad, store.Page{})
			wantField(t, "Usage("+tc.name+")", err, store.CodeInvalid, tc.field)
		}
		_, _, err = s.Usage(t.Context(), q, store.Page{Cursor: "%%%"})
		wantCode(t, "Usage(malformed cursor)", err, store.CodeInvalid)
		other := q
		other.GroupBy = usage.ByHour
		_, _, err = s.Usage(t.Context(), q, store.Page{Cursor: other.Cursor(usage.Key{Wall: now})})
		wantCode(t, "Usage(a cursor of another query)", err, store.CodeInvalid)
	}},
}

// usageFixture is what seedUsage made: the agent, the range its
// consumptions span, the consumptions as listed, and totals of the search
// service.
type usageFixture struct {
	agent        string
	from, to     time.Time
	consumptions []entitlement.Consumption
	searchCount  int64
	searchCents  int64
	searchUnits  int64
}

// seedUsage makes an agent with credits in USD (search) and EUR (maps), a
// quota and a subscription (search), and consumptions of each over three
// days and several hours and tools: refunded ones, a captured hold, an
// open hold (no consumption), and another agent's consumption (not this
// agent's usage).
func seedUsage(t *testing.T, s store.EntitlementStore, clock *Clock) usageFixture {
	t.Helper()
	agent := newAgent()
	from := clock.Now()
	usdCredits := createEntitlement(t, s, credits(agent, 100000, from))
	eurCredits := credits(agent, 100000, from)
	eurCredits.Scope = entitlement.Scope{Service: "maps"}
	eurCredits.Credits = entitlement.Credits{Balance: money.Money{Cents: 100000, Currency: "EUR"}, Granted: money.Money{Cents: 100000, Currency: "EUR"}}
	eurCredits = createEntitlement(t, s, eurCredits)
	q := createEntitlement(t, s, quota(agent, 1000, from))
	sub := createEntitlement(t, s, subscription(agent, from))
	other := newAgent()
	createEntitlement(t, s, credits(other, 1000, from))
	mustConsume(t, s, request(other, "other", 5))

	f := usageFixture{agent: agent, from: from}
	call := func(e entitlement.Entitlement, service, tool string, cents, units int64) entitlement.Consumption {
		t.Helper()
		r := entitlement.ConsumeRequest{AgentID: agent, Service: service, Tool: tool, IdempotencyKey: uuid.NewString(),
			EntitlementID: e.ID, Units: units}
		if e.Type == entitlement.TypeCredits {
			r.Cost = &money.Money{Cents: cents, Currency: e.Credits.Balance.Currency}
		}
		return mustConsume(t, s, r).Consumption
	}
	// Steps of 50 minutes to 7 hours cross hours and days, in UTC and in
	// New York alike.
	steps := []time.Duration{0, 50 * time.Minute, 3 * time.Hour, 7 * time.Hour, 2 * time.Hour, 5 * time.Hour, 7 * time.Hour, 6 * time.Hour, time.Hour, 7 * time.Hour}
	var refundable []entitlement.Consumption
	for i, step := range steps {
		clock.Advance(step)
		tool := []string{"query", "index", "fetch"}[i%3]
		c := call(usdCredits, testService, tool, int64(10+i), 1)
		call(q, testService, tool, 0, int64(1+i%4))
		if i%3 == 0 {
			call(sub, testService, "query", 0, 1)
		}
		if i%4 == 1 {
			refundable = append(refundable, c)
		}
		if i == 2 || i == 7 {
			call(eurCredits, "maps", "route", 20, 1)
		}
	}
	// Refunds: all of one, part of another, and part of a quota call.
	mustRefund(t, s, refundable[0].ID, entitlement.Amount{}, false)
	mustRefund(t, s, refundable[1].ID, entitlement.Amount{Cost: ptr(usd(3))}, false)
	qc := call(q, testService, "index", 0, 4)
	mustRefund(t, s, qc.ID, entitlement.Amount{Units: ptr(int64(3))}, false)
	// A captured hold is a consumption; an open one is not.
	clock.Advance(time.Hour)
	captured := holdRequest(agent, "captured", 50)
	captured.EntitlementID = usdCredits.ID
	h := mustAuthorize(t, s, captured).Hold
	mustCapture(t, s, h, entitlement.Amount{Cost: ptr(usd(30))})
	open := holdRequest(agent, "open", 50)
	open.EntitlementID = usdCredits.ID
	mustAuthorize(t, s, open)
	f.to = clock.Advance(time.Minute)

	f.consumptions = listAllConsumptions(t, s, agent, time.Time{})
	for _, c := range f.consumptions {
		if c.Service != testService {
			continue
		}
		var tally usage.Tally
		tally.Add(&c)
		f.searchCount += tally.Count
		f.searchCents += tally.Cents["USD"]
		f.searchUnits += tally.Units
	}
	return f
}

// usagePages reads every page (of limit) of q's buckets.
func usagePages(t *testing.T, s store.EntitlementStore, q usage.Query, limit int) []usage.Bucket {
	t.Helper()
	call := fmt.Sprintf("Usage(%s)", q.GroupBy)
	out, _ := allPages(t, call, limit, 1000, func(p store.Page) ([]usage.Bucket, string, error) {
		items, next, err := s.Usage(t.Context(), q, p)
		if err == nil && next != "" && len(items) == 0 {
			t.Fatalf("%s (limit %d) returned an empty page with next %q", call, limit, next)
		}
		return items, next, err
	})
	return out
}
