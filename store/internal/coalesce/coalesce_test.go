package coalesce_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/coalesce"
)

// recorder applies each call by answering its op doubled, recording batch sizes.
type recorder struct {
	mu      sync.Mutex
	batches []int
	block   chan struct{} // when set, every batch waits for it
	limit   int           // when > 0, a batch answers at most this many calls
}

func (r *recorder) apply(ctx context.Context, _ string, b *coalesce.Batch[int, int]) error {
	r.mu.Lock()
	r.batches = append(r.batches, b.Len())
	block, limit := r.block, r.limit
	r.mu.Unlock()
	if block != nil {
		select {
		case <-block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range b.Len() {
		if limit > 0 && i == limit {
			break
		}
		b.Answer(i, coalesce.Result[int]{Value: 2 * b.Op(i)})
	}
	return nil
}

func newLanes(r *recorder) *coalesce.Lanes[int, int] {
	return coalesce.New(r.apply, coalesce.Options[int]{MaxBatch: 10, Budget: 5 * time.Second})
}

func TestLanes_BatchesWhatQueued(t *testing.T) {
	r := &recorder{}
	l := newLanes(r)
	defer l.Close()
	waitQueued, resume := l.Pause("e")
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			got, err := l.Do(t.Context(), "e", i)
			if err != nil || got != 2*i {
				t.Errorf("Do(%d) = %d, %v; want %d, nil", i, got, err, 2*i)
			}
		})
	}
	waitQueued(5)
	resume()
	wg.Wait()
	if len(r.batches) != 1 || r.batches[0] != 5 {
		t.Errorf("batches %v, want one of 5", r.batches)
	}
}

// A batch that answers only some calls leaves the rest queued: they run
// in the next batch, in order.
func TestLanes_UnansweredCallsQueueAgain(t *testing.T) {
	r := &recorder{limit: 2}
	l := newLanes(r)
	defer l.Close()
	waitQueued, resume := l.Pause("e")
	var wg sync.WaitGroup
	for i := range 5 {
		wg.Go(func() {
			if got, err := l.Do(t.Context(), "e", i); err != nil || got != 2*i {
				t.Errorf("Do(%d) = %d, %v", i, got, err)
			}
		})
	}
	waitQueued(5)
	resume()
	wg.Wait()
	if want := []int{5, 3, 1}; len(r.batches) != 3 || r.batches[0] != 5 || r.batches[1] != 3 || r.batches[2] != 1 {
		t.Errorf("batches %v, want %v", r.batches, want)
	}
}

// The drift between the two coalescers, settled: a caller that leaves
// before any batch took its call is told the call was not attempted (not
// Uncertain: nothing was applied); one that leaves while its batch runs is
// told it may have been applied (Uncertain).
func TestLanes_CallerLeaves(t *testing.T) {
	t.Run("WhileQueued", func(t *testing.T) {
		r := &recorder{}
		l := newLanes(r)
		defer l.Close()
		_, resume := l.Pause("e")
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
		defer cancel()
		_, err := l.Do(ctx, "e", 1)
		resume()
		if store.CodeOf(err) != store.CodeUnavailable || store.IsUncertain(err) {
			t.Errorf("Do while queued: %v (uncertain %v), want Unavailable, not uncertain", err, store.IsUncertain(err))
		}
	})
	t.Run("WhileTaken", func(t *testing.T) {
		r := &recorder{block: make(chan struct{})}
		l := newLanes(r)
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		// A second, patient caller keeps the batch running after the first leaves.
		patient := make(chan error, 1)
		waitQueued, resume := l.Pause("e")
		go func() { _, err := l.Do(t.Context(), "e", 2); patient <- err }()
		go func() {
			waitQueued(2)
			resume()
		}()
		_, err := l.Do(ctx, "e", 1)
		if store.CodeOf(err) != store.CodeUnavailable || !store.IsUncertain(err) {
			t.Errorf("Do while its batch runs: %v, want Unavailable and uncertain", err)
		}
		close(r.block)
		if err := <-patient; err != nil {
			t.Errorf("patient caller: %v", err)
		}
		l.Close()
	})
}

// Close waits for the batches already running and refuses new calls.
func TestLanes_Close(t *testing.T) {
	r := &recorder{block: make(chan struct{})}
	l := newLanes(r)
	done := make(chan error, 1)
	go func() { _, err := l.Do(t.Context(), "e", 1); done <- err }()
	for {
		r.mu.Lock()
		n := len(r.batches)
		r.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was running")
	case <-time.After(20 * time.Millisecond):
	}
	close(r.block)
	<-closed
	if err := <-done; err != nil {
		t.Errorf("the running call: %v, want it applied", err)
	}
	if _, err := l.Do(t.Context(), "e", 2); !errors.Is(err, coalesce.ErrClosed) {
		t.Errorf("Do after Close: %v, want ErrClosed", err)
	}
}
