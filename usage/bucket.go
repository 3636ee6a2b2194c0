package usage

import (
	"cmp"
	"maps"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// Bucket is what one group of consumptions totals. Service and Tool name
// the group (tool: both; service: Service), or Start and End do (hour, day:
// the calendar hour or day of the query's time zone, which a clock change
// makes shorter or longer than usual); only consumptions inside the
// query's range count, also in a first or last bucket the range cuts.
type Bucket struct {
	// MemberID names the caller of a member bucket.
	MemberID string     `json:"memberId,omitempty"`
	Service  string     `json:"service,omitempty"`
	Tool     string     `json:"tool,omitempty"`
	Start    *time.Time `json:"start,omitempty"`
	End      *time.Time `json:"end,omitempty"`
	// Count is how many consumptions the bucket holds, refunded ones too.
	Count int64 `json:"count"`
	// Amounts is what credits consumptions charged, net of their refunds,
	// one amount per currency charged in the bucket, by currency.
	Amounts []money.Money `json:"amounts"`
	// Units is what quota consumptions charged, net of their refunds.
	Units int64 `json:"units"`
}

// Key is the position of a bucket in the order of its query's buckets:
// by Service then Tool, or by Wall, the local wall-clock start of an hour
// or day (a time labelled UTC that stands for a reading of the clock, as a
// PostgreSQL timestamp without time zone does).
type Key struct {
	Member        string
	Service, Tool string
	Wall          time.Time
}

// Compare orders keys: -1 if k is before o, 0 if equal, +1 if after.
func (k Key) Compare(o Key) int {
	return cmp.Or(cmp.Compare(k.Member, o.Member), cmp.Compare(k.Service, o.Service), cmp.Compare(k.Tool, o.Tool), k.Wall.Compare(o.Wall))
}

// KeyOf returns the key of the bucket c falls in.
func (q *Query) KeyOf(c *entitlement.Consumption) Key {
	switch q.GroupBy {
	case ByTool:
		return Key{Service: c.Service, Tool: c.Tool}
	case ByService:
		return Key{Service: c.Service}
	case ByMember:
		return Key{Member: c.AgentID}
	}
	return Key{Wall: q.Wall(c.OccurredAt)}
}

// Wall returns the local wall-clock start of the hour or day t is in.
func (q *Query) Wall(t time.Time) time.Time {
	l := t.In(q.Location)
	y, m, d := l.Date()
	if q.GroupBy == ByHour {
		return time.Date(y, m, d, l.Hour(), 0, 0, 0, time.UTC)
	}
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

// Next returns the first instant after t that is in another hour or day
// than t: where t's bucket ends. Inside one offset of the zone the next
// boundary is plain arithmetic; at a change of offset (ZoneBounds) the
// clock jumps, and the bucket ends there unless the jump lands in the same
// hour or day, when the search goes on from the new offset.
func (q *Query) Next(t time.Time) time.Time {
	wall := q.Wall(t)
	for {
		l := t.In(q.Location)
		_, offset := l.Zone()
		_, zoneEnd := l.ZoneBounds()
		w := q.Wall(t)
		next := w.Add(time.Hour)
		if q.GroupBy == ByDay {
			next = w.AddDate(0, 0, 1)
		}
		at := next.Add(-time.Duration(offset) * time.Second)
		if zoneEnd.IsZero() || at.Before(zoneEnd) {
			return at
		}
		t = zoneEnd
		if !q.Wall(t).Equal(wall) {
			return t
		}
	}
}

// Span returns where the hour or day of wall begins (its first instant)
// and ends (the first instant of the next one).
func (q *Query) Span(wall time.Time) (start, end time.Time) {
	// No zone is more than 26 hours from UTC's clock, so the clock reads
	// before wall there; step bucket by bucket to the first instant at or
	// after wall.
	start = wall.Add(-26 * time.Hour)
	for q.Wall(start).Before(wall) {
		start = q.Next(start)
	}
	return start.UTC(), q.Next(start).UTC()
}

// Tally adds up the consumptions of one bucket.
type Tally struct {
	Count int64
	// Cents is the net charged per currency.
	Cents map[string]int64
	Units int64
}

// Add counts c in t.
func (t *Tally) Add(c *entitlement.Consumption) {
	t.Count++
	if c.EntitlementType == entitlement.TypeQuota {
		t.Units += c.Units
		if c.Refund != nil {
			t.Units -= c.Refund.Units
		}
	}
	if c.Cost.Currency != "" {
		if t.Cents == nil {
			t.Cents = map[string]int64{}
		}
		t.Cents[c.Cost.Currency] += c.Cost.Cents
		if c.Refund != nil {
			t.Cents[c.Cost.Currency] -= c.Refund.Cost.Cents
		}
	}
}

// Bucket returns the bucket of k that t totals. Amounts and units are
// capped at money.MaxCents (2^53−1), the most a JSON client reads exactly;
// docs/api.md says so.
func (q *Query) Bucket(k Key, t Tally) Bucket {
	b := Bucket{MemberID: k.Member, Service: k.Service, Tool: k.Tool, Count: t.Count, Units: min(t.Units, money.MaxCents), Amounts: []money.Money{}}
	if q.GroupBy.ByTime() {
		start, end := q.Span(k.Wall)
		b.Start, b.End = &start, &end
	}
	for _, cur := range slices.Sorted(maps.Keys(t.Cents)) {
		b.Amounts = append(b.Amounts, money.Money{Cents: min(t.Cents[cur], money.MaxCents), Currency: cur})
	}
	return b
}

// Covers reports whether c is one of q's account's consumptions: its caller
// or its paying wallet is the account.
func (q *Query) Covers(c *entitlement.Consumption) bool {
	return c.AgentID == q.AgentID || c.WalletID == q.AgentID
}

// Aggregate returns every bucket of q over cs (an account's consumptions,
// in any order; others are skipped), in key order. It is the reference the
// stores agree with; the memory store answers with it.
func (q *Query) Aggregate(cs []entitlement.Consumption) ([]Key, []Bucket) {
	tallies := map[Key]*Tally{}
	for i := range cs {
		c := &cs[i]
		if !q.Covers(c) || c.OccurredAt.Before(q.From) || !c.OccurredAt.Before(q.To) {
			continue
		}
		k := q.KeyOf(c)
		if tallies[k] == nil {
			tallies[k] = &Tally{}
		}
		tallies[k].Add(c)
	}
	keys := slices.SortedFunc(maps.Keys(tallies), Key.Compare)
	buckets := make([]Bucket, len(keys))
	for i, k := range keys {
		buckets[i] = q.Bucket(k, *tallies[k])
	}
	return keys, buckets
}
