package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/usage"
)

func TestBalance(t *testing.T) {
	e := newEnv(t)
	e.grantCredits(agentA, 100)
	e.grantCredits(agentA, 50)
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 30)})
	var b entitlement.Balance
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: e.keys.Reader}).decode(t, &b)
	usd := func(c int64) money.Money { return money.Money{Cents: c, Currency: "USD"} }
	want := []entitlement.CreditsBalance{{Currency: "USD", Total: usd(120), Held: usd(0), Available: usd(120), Entitlements: 2}}
	if d := cmp.Diff(want, b.Credits); d != "" || b.AgentID != agentA || b.Quotas == nil || b.Subscriptions == nil {
		t.Errorf("GET balance = %+v (credits -want +got):\n%s", b, d)
	}
	e.must(http.StatusForbidden, req{Method: "GET", Path: "/v1/accounts/" + agentB + "/balance", Key: e.keys.Reader})
	e.must(http.StatusForbidden, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: e.keys.Host})
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance", Key: e.keys.Billing})
}

// usagePage is the body of GET …/usage.
type usagePage struct {
	AgentID    string
	From, To   time.Time
	GroupBy    usage.GroupBy
	TZ         string
	Items      []usage.Bucket
	NextCursor string
}

func TestUsage(t *testing.T) {
	e := newEnv(t)
	e.grantCredits(agentA, 1000)
	start := e.clock.Now()
	for i := range 3 {
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, fmt.Sprint("k", i), 10)})
		e.clock.Advance(20 * time.Hour)
	}
	path := func(query url.Values) string { return "/v1/accounts/" + agentA + "/usage?" + query.Encode() }

	// Defaults: the 30 days up to now, by day, in UTC.
	var page usagePage
	e.must(http.StatusOK, req{Method: "GET", Path: path(nil), Key: e.keys.Reader}).decode(t, &page)
	now := e.clock.Now()
	if page.AgentID != agentA || page.GroupBy != usage.ByDay || page.TZ != "UTC" || !page.To.Equal(now) || !page.From.Equal(now.Add(-usage.DefaultRange)) {
		t.Errorf("GET usage (defaults) = %s %s %s [%s, %s); want %s day UTC, 30 days up to %s", page.AgentID, page.GroupBy, page.TZ, page.From, page.To, agentA, now)
	}
	if len(page.Items) != 3 { // 09:26, 05:26 the next day, 01:26 the day after
		t.Errorf("GET usage (defaults) = %d buckets, want 3: %+v", len(page.Items), page.Items)
	}

	// Days in New York, a page at a time: starts shown in the zone's offset.
	query := url.Values{"from": {start.Format(time.RFC3339)}, "to": {now.Format(time.RFC3339)}, "groupBy": {"day"},
		"tz": {"America/New_York"}, "limit": {"1"}}
	var all []usage.Bucket
	for range 10 {
		var p usagePage
		e.must(http.StatusOK, req{Method: "GET", Path: path(query), Key: e.keys.Reader}).decode(t, &p)
		all = append(all, p.Items...)
		if p.NextCursor == "" {
			break
		}
		query.Set("cursor", p.NextCursor)
	}
	// 07:00 on March 1 in New York, then 03:00 and 23:00 on March 2.
	wantCents := []int64{10, 20}
	if len(all) != 2 || all[0].Count != 1 || all[1].Count != 2 {
		t.Fatalf("usage by day in New York, pages of 1 = %+v; want 2 buckets of 1 and 2 calls", all)
	}
	for i, b := range all {
		if _, offset := b.Start.Zone(); offset != -5*3600 || b.Start.Hour() != 0 || b.Start.Day() != i+1 || b.Amounts[0].Cents != wantCents[i] {
			t.Errorf("bucket %d = %+v, want March %d from local midnight at -05:00 with %d cents", i, b, i+1, wantCents[i])
		}
	}
}

func TestUsage_BadInput(t *testing.T) {
	e := newEnv(t)
	now := e.clock.Now()
	at := func(d time.Duration) string { return now.Add(d).Format(time.RFC3339) }
	tests := []struct {
		name, query, field string
	}{
		{"FromAfterTo", "from=" + at(time.Hour) + "&to=" + at(0), "from"},
		{"UnknownZone", "tz=Mars/Olympus_Mons", "tz"},
		{"LocalZone", "tz=Local", "tz"},
		{"OverAYear", "from=" + at(-367*24*time.Hour) + "&to=" + at(0), "to"},
		{"BadGroupBy", "groupBy=week", "groupBy"},
		{"HoursOverTooLong", "groupBy=hour&from=" + at(-32*24*time.Hour), "groupBy"},
		{"BadFrom", "from=yesterday", "from"},
		{"BadTo", "to=2026-13-01T00:00:00Z", "to"},
		{"BadCursor", "cursor=nope", "cursor"},
		{"BadLimit", "limit=101", "limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/usage?" + tt.query, Key: e.keys.Reader}).problem(t)
			if len(p.Errors) != 1 || p.Errors[0].Field != tt.field {
				t.Errorf("GET usage?%s: errors %+v, want one naming %s", tt.query, p.Errors, tt.field)
			}
		})
	}
}
