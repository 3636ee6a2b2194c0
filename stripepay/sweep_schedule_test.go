package stripepay

import (
	"testing"
	"time"
)

// TestReadPointPassed: a pending payment is read at Age, then with gaps
// doubling up to MaxGap, then every MaxGap; ticks between read points read
// nothing. Swept every minute for a day, a payment is read 3 times in its
// first 40 minutes and then once an hour: 27 reads, not 1,436.
func TestReadPointPassed(t *testing.T) {
	const first, maxGap = 5 * time.Minute, time.Hour
	var reads []time.Duration
	for age := first; age <= 24*time.Hour; age += time.Minute {
		if readPointPassed(age-time.Minute, age, first, maxGap) {
			reads = append(reads, age)
		}
	}
	want := []time.Duration{5 * time.Minute, 10 * time.Minute, 20 * time.Minute, 40 * time.Minute}
	for at := 80 * time.Minute; at <= 24*time.Hour; at += maxGap {
		want = append(want, at)
	}
	if len(reads) != len(want) {
		t.Fatalf("reads at %v (%d), want %v (%d)", reads, len(reads), want, len(want))
	}
	for i := range want {
		if reads[i] != want[i] {
			t.Fatalf("read %d at %s, want %s (all: %v)", i, reads[i], want[i], reads)
		}
	}
	// A sweep that skipped several points (an instance that paused) reads once.
	if !readPointPassed(30*time.Minute, 5*time.Hour, first, maxGap) || readPointPassed(81*time.Minute, 139*time.Minute, first, maxGap) {
		t.Error("a wide window must read once if it holds a point, and not if it holds none")
	}
}
