package usage_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/usage"
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t.UTC()
}

func TestQuery_Span(t *testing.T) {
	tests := []struct {
		name       string
		zone       string
		groupBy    usage.GroupBy
		wall       string
		start, end string
	}{
		{"UTCDay", "UTC", usage.ByDay, "2026-03-14T00:00:00Z", "2026-03-14T00:00:00Z", "2026-03-15T00:00:00Z"},
		{"NewYorkDay", "America/New_York", usage.ByDay, "2026-01-10T00:00:00Z", "2026-01-10T05:00:00Z", "2026-01-11T05:00:00Z"},
		// 2026-03-08: clocks go from 02:00 EST to 03:00 EDT, a 23-hour day.
		{"SpringForwardDay", "America/New_York", usage.ByDay, "2026-03-08T00:00:00Z", "2026-03-08T05:00:00Z", "2026-03-09T04:00:00Z"},
		// 2026-11-01: clocks go back from 02:00 EDT to 01:00 EST, a 25-hour day.
		{"FallBackDay", "America/New_York", usage.ByDay, "2026-11-01T00:00:00Z", "2026-11-01T04:00:00Z", "2026-11-02T05:00:00Z"},
		// The hour 01:00 happens twice that night: one bucket of two hours.
		{"FallBackHour", "America/New_York", usage.ByHour, "2026-11-01T01:00:00Z", "2026-11-01T05:00:00Z", "2026-11-01T07:00:00Z"},
		{"SpringForwardHourBefore", "America/New_York", usage.ByHour, "2026-03-08T01:00:00Z", "2026-03-08T06:00:00Z", "2026-03-08T07:00:00Z"},
		{"HalfHourZone", "Asia/Kolkata", usage.ByHour, "2026-03-14T10:00:00Z", "2026-03-14T04:30:00Z", "2026-03-14T05:30:00Z"},
		{"QuarterHourZoneDay", "Asia/Kathmandu", usage.ByDay, "2026-03-14T00:00:00Z", "2026-03-13T18:15:00Z", "2026-03-14T18:15:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := usage.Query{GroupBy: tt.groupBy, Location: zone(t, tt.zone)}
			start, end := q.Span(at(tt.wall))
			if !start.Equal(at(tt.start)) || !end.Equal(at(tt.end)) {
				t.Errorf("Span(%s) in %s = [%s, %s), want [%s, %s)", tt.wall, tt.zone, start, end, tt.start, tt.end)
			}
			if got := q.Wall(start); !got.Equal(at(tt.wall)) {
				t.Errorf("Wall(%s) = %s, want %s", start, got, tt.wall)
			}
			if got := q.Wall(end.Add(-time.Microsecond)); !got.Equal(at(tt.wall)) {
				t.Errorf("Wall(just before end %s) = %s, want %s", end, got, tt.wall)
			}
		})
	}
}

// TestQuery_NextCoversEveryInstant walks a year of hours and days in zones
// with clock changes: each bucket begins where the last one ended, and
// every instant inside has the bucket's wall-clock key.
func TestQuery_NextCoversEveryInstant(t *testing.T) {
	for _, name := range []string{"UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe", "America/Santiago"} {
		for _, g := range []usage.GroupBy{usage.ByHour, usage.ByDay} {
			q := usage.Query{GroupBy: g, Location: zone(t, name)}
			from := at("2026-01-01T00:00:00Z")
			for b := from; b.Before(from.AddDate(1, 0, 0)); {
				next := q.Next(b)
				if !next.After(b) || next.Sub(b) > 26*time.Hour {
					t.Fatalf("%s %s: Next(%s) = %s", name, g, b, next)
				}
				if w := q.Wall(b); !q.Wall(next.Add(-time.Microsecond)).Equal(w) || q.Wall(next).Equal(w) {
					t.Fatalf("%s %s: bucket [%s, %s) does not have one key %s", name, g, b, next, w)
				}
				b = next
			}
		}
	}
}

func TestQuery_Normalize(t *testing.T) {
	from := at("2026-03-01T00:00:00Z")
	valid := func() usage.Query {
		return usage.Query{AgentID: "a", From: from, To: from.Add(24 * time.Hour), GroupBy: usage.ByDay}
	}
	tests := []struct {
		name      string
		mutate    func(q *usage.Query)
		wantField string
	}{
		{"Valid", func(q *usage.Query) {}, ""},
		{"FullYear", func(q *usage.Query) { q.To = q.From.Add(usage.MaxRange) }, ""},
		{"Hour31Days", func(q *usage.Query) { q.GroupBy, q.To = usage.ByHour, q.From.Add(usage.MaxHourRange) }, ""},
		{"NoAgent", func(q *usage.Query) { q.AgentID = "" }, "agentId"},
		{"BadGroupBy", func(q *usage.Query) { q.GroupBy = "week" }, "groupBy"},
		{"FromAfterTo", func(q *usage.Query) { q.From, q.To = q.To, q.From }, "from"},
		{"EmptyRange", func(q *usage.Query) { q.To = q.From }, "from"},
		{"OverAYear", func(q *usage.Query) { q.To = q.From.Add(usage.MaxRange + time.Microsecond) }, "to"},
		{"HourOver31Days", func(q *usage.Query) { q.GroupBy, q.To = usage.ByHour, q.From.Add(usage.MaxHourRange+time.Hour) }, "groupBy"},
		{"FromYear0", func(q *usage.Query) { q.From = time.Date(0, 12, 31, 0, 0, 0, 0, time.UTC) }, "from"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q := valid()
			tt.mutate(&q)
			err := q.Normalize()
			if tt.wantField == "" {
				if err != nil || q.Location != time.UTC {
					t.Fatalf("Normalize() = %v, location %v; want nil, UTC", err, q.Location)
				}
				return
			}
			var fe *field.Error
			if !errors.As(err, &fe) || fe.Field != tt.wantField {
				t.Fatalf("Normalize() = %v, want a *field.Error on %q", err, tt.wantField)
			}
		})
	}
}

func TestQuery_AggregateAndPage(t *testing.T) {
	usd := func(c int64) money.Money { return money.Money{Cents: c, Currency: "USD"} }
	q := usage.Query{AgentID: "a", From: at("2026-03-01T00:00:00Z"), To: at("2026-03-03T00:00:00Z"), GroupBy: usage.ByTool}
	if err := q.Normalize(); err != nil {
		t.Fatal(err)
	}
	cs := []entitlement.Consumption{
		{AgentID: "a", Service: "s", Tool: "b", EntitlementType: entitlement.TypeCredits, Cost: usd(10), Units: 3, OccurredAt: at("2026-03-01T01:00:00Z"),
			Refund: &entitlement.Refund{Charge: entitlement.Charge{Cost: usd(4)}}},
		{AgentID: "a", Service: "s", Tool: "b", EntitlementType: entitlement.TypeQuota, Units: 5, OccurredAt: at("2026-03-02T01:00:00Z"),
			Refund: &entitlement.Refund{Charge: entitlement.Charge{Units: 2}}},
		{AgentID: "a", Service: "s", Tool: "a", EntitlementType: entitlement.TypeSubscription, Units: 1, OccurredAt: at("2026-03-02T23:59:59Z")},
		{AgentID: "a", Service: "s", Tool: "a", EntitlementType: entitlement.TypeSubscription, Units: 1, OccurredAt: at("2026-03-03T00:00:00Z")}, // at To: out
		{AgentID: "b", Service: "s", Tool: "a", EntitlementType: entitlement.TypeSubscription, Units: 1, OccurredAt: at("2026-03-02T00:00:00Z")}, // another agent
	}
	keys, buckets := q.Aggregate(cs)
	want := []usage.Bucket{
		{Service: "s", Tool: "a", Count: 1, Amounts: []money.Money{}},
		{Service: "s", Tool: "b", Count: 2, Amounts: []money.Money{usd(6)}, Units: 3},
	}
	if d := cmp.Diff(want, buckets); d != "" {
		t.Errorf("Aggregate (-want +got):\n%s", d)
	}
	page, next, err := q.Page(keys, buckets, "", 1)
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("Page(first, 1) = %v, %q, %v; want one bucket and a cursor", page, next, err)
	}
	page, next, err = q.Page(keys, buckets, next, 1)
	if err != nil || len(page) != 1 || page[0].Tool != "b" || next != "" {
		t.Fatalf("Page(second, 1) = %v, %q, %v; want tool b and no cursor", page, next, err)
	}
	other := q
	other.GroupBy = usage.ByService
	if _, _, err := other.Page(keys, buckets, q.Cursor(keys[0]), 1); !errors.Is(err, usage.ErrCursor) {
		t.Errorf("Page(a cursor of another query) = %v, want ErrCursor", err)
	}
}

// TestQuery_BucketCapsTotals: a bucket's amounts and units past 2^53−1
// (money.MaxCents) are shown capped at it, as docs/api.md says.
func TestQuery_BucketCapsTotals(t *testing.T) {
	q := usage.Query{AgentID: "a", From: at("2026-03-01T00:00:00Z"), To: at("2026-03-03T00:00:00Z"), GroupBy: usage.ByTool}
	if err := q.Normalize(); err != nil {
		t.Fatal(err)
	}
	var tally usage.Tally
	for _, typ := range []entitlement.Type{entitlement.TypeCredits, entitlement.TypeCredits, entitlement.TypeQuota, entitlement.TypeQuota} {
		c := entitlement.Consumption{AgentID: "a", Service: "s", Tool: "t", EntitlementType: typ, OccurredAt: at("2026-03-01T01:00:00Z")}
		if typ == entitlement.TypeCredits {
			c.Cost = money.Money{Cents: money.MaxCents, Currency: "USD"}
		} else {
			c.Units = money.MaxCents
		}
		tally.Add(&c)
	}
	got := q.Bucket(usage.Key{Service: "s", Tool: "t"}, tally)
	want := usage.Bucket{Service: "s", Tool: "t", Count: 4, Units: money.MaxCents, Amounts: []money.Money{{Cents: money.MaxCents, Currency: "USD"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Bucket of totals past 2^53−1 (-want +got):\n%s", diff)
	}
}

func TestQuery_ByMember(t *testing.T) {
	q := usage.Query{AgentID: "w", From: at("2026-03-01T00:00:00Z"), To: at("2026-03-03T00:00:00Z"), GroupBy: usage.ByMember}
	if err := q.Normalize(); err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	cons := func(agent, wallet string, cents int64) entitlement.Consumption {
		return entitlement.Consumption{AgentID: agent, WalletID: wallet, Service: "s", Tool: "t", OccurredAt: at("2026-03-02T00:00:00Z"),
			EntitlementType: entitlement.TypeCredits, Cost: money.Money{Cents: cents, Currency: "USD"}, Units: 1}
	}
	cs := []entitlement.Consumption{cons("b", "w", 5), cons("a", "w", 2), cons("a", "w", 3), cons("a", "", 100), cons("w2", "", 7)}
	keys, buckets := q.Aggregate(cs)
	if len(buckets) != 2 || buckets[0].MemberID != "a" || buckets[0].Count != 2 || buckets[0].Amounts[0].Cents != 5 || buckets[1].MemberID != "b" {
		t.Fatalf("Aggregate by member of wallet w = %+v, want a (2 calls, 5 cents) then b", buckets)
	}
	page, next, err := q.Page(keys, buckets, "", 1)
	if err != nil || len(page) != 1 || next == "" {
		t.Fatalf("Page(1) = %+v, %q, %v", page, next, err)
	}
	if page, _, err = q.Page(keys, buckets, next, 1); err != nil || len(page) != 1 || page[0].MemberID != "b" {
		t.Errorf("second page = %+v, %v; want b", page, err)
	}
	// The member's own usage counts its calls on the wallet and its own.
	q.AgentID = "a"
	if _, buckets := q.Aggregate(cs); len(buckets) != 1 || buckets[0].Count != 3 {
		t.Errorf("Aggregate by member of agent a = %+v, want one bucket of 3 calls", buckets)
	}
}
