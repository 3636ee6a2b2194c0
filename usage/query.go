// Package usage is the aggregation of an agent's consumptions over time:
// what a usage query asks (a range, a grouping, a time zone), the buckets it
// answers, and the pure rules every store applies alike: which bucket a
// consumption falls in, where a calendar hour or day begins and ends in a
// time zone, what a bucket totals, and the cursor of a page of buckets.
package usage

import (
	"fmt"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
)

// GroupBy is what a usage query makes one bucket of.
type GroupBy string

// The groupings.
const (
	// ByTool: one bucket per (service, tool); a tool is named within its service.
	ByTool GroupBy = "tool"
	// ByService: one bucket per service.
	ByService GroupBy = "service"
	// ByHour and ByDay: one bucket per calendar hour or day of the query's
	// time zone that holds a consumption.
	ByHour GroupBy = "hour"
	ByDay  GroupBy = "day"
	// ByMember: one bucket per caller (the consumption's AgentID): for a
	// wallet, what each member spent from it; for an agent, its own.
	ByMember GroupBy = "member"
)

// Valid reports whether g is a known grouping.
func (g GroupBy) Valid() bool {
	return g == ByTool || g == ByService || g == ByHour || g == ByDay || g == ByMember
}

// ByTime reports whether g makes buckets of time.
func (g GroupBy) ByTime() bool { return g == ByHour || g == ByDay }

// Bounds of a usage query.
const (
	// MaxRange is the longest range a query may cover: a year, leap day
	// included.
	MaxRange = 366 * 24 * time.Hour
	// MaxHourRange is the longest range hour buckets may cover: 31 days,
	// at most 745 buckets (a clock change adds one). Hour buckets are for
	// charting a day or a month; longer ranges group by day.
	MaxHourRange = 31 * 24 * time.Hour
	// DefaultRange is the range a query covers when it names no start.
	DefaultRange = 30 * 24 * time.Hour
)

// Query asks for the usage of one account: the consumptions that occurred
// in [From, To) whose caller (AgentID) or paying wallet (WalletID) is the
// account, in buckets of GroupBy, with hours and days counted in Location.
// An ID is an agent's or a wallet's, never both, so for an agent these are
// its calls (to its own entitlements and its wallets'), for a wallet its
// members' calls charged to it.
type Query struct {
	AgentID  string
	From, To time.Time
	GroupBy  GroupBy
	// Location is the time zone of hour and day buckets; nil means UTC.
	Location *time.Location
}

// Normalize checks q and brings it to the form every store reads: From and
// To in UTC at microsecond precision (what stores keep), a Location set.
// Errors are *field.Error values naming the query parameter.
func (q *Query) Normalize() error {
	if q.Location == nil {
		q.Location = time.UTC
	}
	q.From, q.To = stamp(q.From), stamp(q.To)
	switch {
	case !entitlement.ValidName(q.AgentID):
		return &field.Error{Field: "agentId", Reason: fmt.Sprintf("must be 1–%d printable ASCII characters", entitlement.MaxNameLen)}
	case !q.GroupBy.Valid():
		return &field.Error{Field: "groupBy", Reason: "must be tool, service, hour, day or member"}
	case !entitlement.ValidInstant(q.From):
		return &field.Error{Field: "from", Reason: "must be within the years 0001–9999 in UTC"}
	case !entitlement.ValidInstant(q.To):
		return &field.Error{Field: "to", Reason: "must be within the years 0001–9999 in UTC"}
	case !q.From.Before(q.To):
		return &field.Error{Field: "from", Reason: "must be before to"}
	case q.To.Sub(q.From) > MaxRange:
		return &field.Error{Field: "to", Reason: "must be at most 366 days after from"}
	case q.GroupBy == ByHour && q.To.Sub(q.From) > MaxHourRange:
		return &field.Error{Field: "groupBy", Reason: "hour buckets need a range of at most 31 days; group a longer one by day"}
	}
	return nil
}

// stamp is an instant as stores keep it: UTC, microsecond precision.
func stamp(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }
