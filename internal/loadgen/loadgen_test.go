package loadgen_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/stipend-mcp/stipend/internal/loadgen"
)

// TestDrive checks that every index runs exactly once, failures are counted
// with the first error kept, and a cancelled context runs nothing.
func TestDrive(t *testing.T) {
	var mu sync.Mutex
	seen := map[int]int{}
	l := loadgen.Drive(t.Context(), 8, 100, func(_ context.Context, i int) error {
		mu.Lock()
		seen[i]++
		mu.Unlock()
		if i%10 == 0 {
			return errors.New("tenth")
		}
		return nil
	})
	if l.OK != 90 || l.Failed != 10 || l.FirstErr != "tenth" || len(l.Latencies) != 100 {
		t.Errorf("Drive = ok %d, failed %d, first error %q, %d latencies; want 90, 10, \"tenth\", 100", l.OK, l.Failed, l.FirstErr, len(l.Latencies))
	}
	for i := range 100 {
		if seen[i] != 1 {
			t.Errorf("index %d ran %d times, want once", i, seen[i])
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l := loadgen.Drive(ctx, 4, 10, func(context.Context, int) error { return nil }); l.OK+l.Failed != 0 {
		t.Errorf("Drive on a cancelled context ran %d calls, want none", l.OK+l.Failed)
	}
}
