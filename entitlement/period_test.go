package entitlement_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

func date(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestPeriod_NextBoundary(t *testing.T) {
	tests := []struct {
		name   string
		period entitlement.Period
		anchor string
		now    string
		want   string
	}{
		{"HourInside", entitlement.PeriodHour, "2026-01-01T00:30:00Z", "2026-01-01T00:45:00Z", "2026-01-01T01:30:00Z"},
		{"HourExactlyAtBoundary", entitlement.PeriodHour, "2026-01-01T00:30:00Z", "2026-01-01T01:30:00Z", "2026-01-01T02:30:00Z"},
		{"HourManyMissed", entitlement.PeriodHour, "2026-01-01T00:00:00Z", "2026-01-03T05:10:00Z", "2026-01-03T06:00:00Z"},
		{"BeforeAnchor", entitlement.PeriodDay, "2026-01-05T00:00:00Z", "2026-01-01T00:00:00Z", "2026-01-05T00:00:00Z"},
		{"AtAnchor", entitlement.PeriodDay, "2026-01-05T00:00:00Z", "2026-01-05T00:00:00Z", "2026-01-06T00:00:00Z"},
		{"DayOneNanoBefore", entitlement.PeriodDay, "2026-01-01T12:00:00Z", "2026-01-02T11:59:59.999999999Z", "2026-01-02T12:00:00Z"},
		{"WeekSkipsThree", entitlement.PeriodWeek, "2026-01-01T00:00:00Z", "2026-01-29T00:00:01Z", "2026-02-05T00:00:00Z"},
		{"MonthSimple", entitlement.PeriodMonth, "2026-01-15T09:00:00Z", "2026-01-20T00:00:00Z", "2026-02-15T09:00:00Z"},
		{"MonthExactlyAtBoundary", entitlement.PeriodMonth, "2026-01-15T09:00:00Z", "2026-02-15T09:00:00Z", "2026-03-15T09:00:00Z"},
		{"MonthEndClampFeb", entitlement.PeriodMonth, "2026-01-31T00:00:00Z", "2026-02-01T00:00:00Z", "2026-02-28T00:00:00Z"},
		{"MonthEndClampLeapFeb", entitlement.PeriodMonth, "2028-01-31T00:00:00Z", "2028-02-01T00:00:00Z", "2028-02-29T00:00:00Z"},
		{"MonthEndBackTo31", entitlement.PeriodMonth, "2026-01-31T00:00:00Z", "2026-02-28T00:00:00Z", "2026-03-31T00:00:00Z"},
		{"MonthEndApril", entitlement.PeriodMonth, "2026-01-31T00:00:00Z", "2026-03-31T00:00:00Z", "2026-04-30T00:00:00Z"},
		{"MonthManyMissed", entitlement.PeriodMonth, "2026-01-31T00:00:00Z", "2027-02-10T00:00:00Z", "2027-02-28T00:00:00Z"},
		{"MonthYearEnd", entitlement.PeriodMonth, "2026-12-31T23:00:00Z", "2027-01-01T00:00:00Z", "2027-01-31T23:00:00Z"},
		{"MonthNowLaterDayThanAnchor", entitlement.PeriodMonth, "2026-01-10T00:00:00Z", "2026-03-25T00:00:00Z", "2026-04-10T00:00:00Z"},
		{"MonthNowEarlierDayThanAnchor", entitlement.PeriodMonth, "2026-01-10T00:00:00Z", "2026-03-05T00:00:00Z", "2026-03-10T00:00:00Z"},
		{"LeapDayAnchorYears", entitlement.PeriodMonth, "2028-02-29T00:00:00Z", "2029-02-01T00:00:00Z", "2029-02-28T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.period.NextBoundary(date(tt.anchor), date(tt.now))
			if want := date(tt.want); !got.Equal(want) {
				t.Errorf("%s.NextBoundary(%s, %s) = %s, want %s", tt.period, tt.anchor, tt.now, got.Format(time.RFC3339Nano), tt.want)
			}
		})
	}
}

// TestPeriod_NextBoundaryProperties checks, across many anchors and instants,
// that the result is a boundary, lies strictly after now, and that the one
// before it does not.
func TestPeriod_NextBoundaryProperties(t *testing.T) {
	anchor := date("2024-01-31T10:00:00Z")
	for _, p := range []entitlement.Period{entitlement.PeriodHour, entitlement.PeriodDay, entitlement.PeriodWeek, entitlement.PeriodMonth} {
		for now := anchor; now.Before(anchor.AddDate(3, 0, 0)); now = now.Add(37*time.Hour + 13*time.Minute) {
			got := p.NextBoundary(anchor, now)
			if !got.After(now) {
				t.Fatalf("%s: NextBoundary(%s) = %s, not after now", p, now, got)
			}
			var k int64
			for p.Boundary(anchor, k).Before(got) {
				k++
			}
			if !p.Boundary(anchor, k).Equal(got) {
				t.Fatalf("%s: NextBoundary(%s) = %s is not a boundary", p, now, got)
			}
			if k > 0 && p.Boundary(anchor, k-1).After(now) {
				t.Fatalf("%s: NextBoundary(%s) = %s skipped boundary %s", p, now, got, p.Boundary(anchor, k-1))
			}
		}
	}
}
