package entitlement

import "time"

// Period is the length of a quota window.
type Period string

// The quota periods.
const (
	PeriodHour  Period = "hour"
	PeriodDay   Period = "day"
	PeriodWeek  Period = "week"
	PeriodMonth Period = "month"
)

// Valid reports whether p is a known period.
func (p Period) Valid() bool {
	return p == PeriodHour || p == PeriodDay || p == PeriodWeek || p == PeriodMonth
}

// fixed returns the length of a fixed-length period (all but month). Days are
// 24 hours: Stipend keeps every instant in UTC.
func (p Period) fixed() time.Duration {
	switch p {
	case PeriodHour:
		return time.Hour
	case PeriodDay:
		return 24 * time.Hour
	case PeriodWeek:
		return 7 * 24 * time.Hour
	}
	return 0
}

// Boundary returns the k-th period boundary counted from anchor (k = 0 is the
// anchor itself). Monthly boundaries use calendar months, clamped to the end
// of a shorter month and computed from the anchor each time, so an anchor on
// Jan 31 gives Feb 28 (29 in a leap year), Mar 31, Apr 30, …
func (p Period) Boundary(anchor time.Time, k int64) time.Time {
	anchor = anchor.UTC()
	if d := p.fixed(); d != 0 {
		return anchor.Add(time.Duration(k) * d)
	}
	y, m, d := anchor.Date()
	total := int64(y)*12 + int64(m-1) + k
	ty, tm := int(total/12), time.Month(total%12+1)
	if last := daysIn(ty, tm); d > last {
		d = last
	}
	h, mi, s := anchor.Clock()
	return time.Date(ty, tm, d, h, mi, s, anchor.Nanosecond(), time.UTC)
}

// NextBoundary returns the first boundary strictly after now. Any number of
// missed periods are skipped at once.
func (p Period) NextBoundary(anchor, now time.Time) time.Time {
	if now.Before(anchor) {
		return anchor
	}
	var k int64
	if d := p.fixed(); d != 0 {
		k = int64(now.Sub(anchor)/d) + 1
	} else {
		ay, am, _ := anchor.UTC().Date()
		ny, nm, _ := now.UTC().Date()
		k = int64(ny-ay)*12 + int64(nm-am)
		if k < 1 {
			k = 1
		}
		// The estimate is at most one month off in either direction.
		for k > 1 && p.Boundary(anchor, k-1).After(now) {
			k--
		}
	}
	for !p.Boundary(anchor, k).After(now) {
		k++
	}
	return p.Boundary(anchor, k)
}

func daysIn(y int, m time.Month) int {
	return time.Date(y, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}
