package stripepay

import "time"

// DefaultSweepMaxGap is the longest a pending payment waits between two
// reads by one instance's sweep.
const DefaultSweepMaxGap = time.Hour

// readPointPassed reports whether a pending payment whose age was from at an
// instance's previous sweep and is to now (from < to) passed one of its read
// points meanwhile. The read points back off by age: first (the sweep's
// Age), then each gap doubling (2×first, 4×first, …) until it reaches
// maxGap, then every maxGap. A payment whose webhook was lost is read soon
// after Age, as before; one that stays pending (a payer who never pays, a
// session left open) is read a few times in its first hour and then
// hourly, not at every tick of every instance for ever.
func readPointPassed(from, to, first, maxGap time.Duration) bool {
	r := first
	for r < maxGap { // the doubling phase: first, 2×first, 4×first, …
		if r > to {
			return false
		}
		if r > from {
			return true
		}
		r *= 2
	}
	// Then r, r+maxGap, r+2×maxGap, …: one of them is in (from, to] when
	// the count of points at or before to exceeds the count at or before from.
	points := func(age time.Duration) time.Duration {
		if age < r {
			return 0
		}
		return (age-r)/maxGap + 1
	}
	return points(to) > points(from)
}
