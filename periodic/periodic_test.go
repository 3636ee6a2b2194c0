package periodic_test

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/periodic"
)

// TestRun: the step runs again and again, with the context Run was given,
// and Run returns once that context is done.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	steps := make(chan context.Context)
	done := make(chan struct{})
	go func() {
		defer close(done)
		periodic.Run(ctx, time.Millisecond, func(c context.Context) { steps <- c })
	}()
	for i := range 3 {
		if got := <-steps; got != ctx {
			t.Fatalf("step %d got context %v, want Run's", i, got)
		}
	}
	cancel()
	// A tick may have started a step just as ctx was cancelled.
	for {
		select {
		case <-steps:
			continue
		case <-done:
		}
		break
	}
}

// TestRun_Cancelled: with its context already done, Run returns without a
// step.
func TestRun_Cancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	periodic.Run(ctx, time.Nanosecond, func(context.Context) { t.Error("a step ran after the context was done") })
}
