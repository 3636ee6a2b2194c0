package api_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
)

// TestStoreContext: a request's store context, whose timer starts only when
// something waits on it, ends as context.WithDeadline's would: at its
// deadline, with its parent, when the request is done, and so do the
// contexts derived from it.
func TestStoreContext(t *testing.T) {
	const short = 50 * time.Millisecond
	waitDone := func(t *testing.T, ctx context.Context, want error) {
		t.Helper()
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatalf("Done not closed after 5 s, want closed with %v", want)
		}
		if err := ctx.Err(); !errors.Is(err, want) {
			t.Errorf("Err() = %v, want %v", err, want)
		}
	}
	t.Run("DeadlineWhileWaiting", func(t *testing.T) {
		ctx, release := api.StoreContext(t.Context(), time.Now().Add(short))
		defer release()
		if err := ctx.Err(); err != nil {
			t.Fatalf("Err() before the deadline = %v, want nil", err)
		}
		waitDone(t, ctx, context.DeadlineExceeded)
	})
	t.Run("DeadlineWithoutWaiting", func(t *testing.T) {
		ctx, release := api.StoreContext(t.Context(), time.Now().Add(short))
		defer release()
		time.Sleep(2 * short) // nothing to wait on: the point is that nothing waits
		if err := ctx.Err(); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Err() after the deadline, never waited on = %v, want %v", err, context.DeadlineExceeded)
		}
		waitDone(t, ctx, context.DeadlineExceeded)
	})
	t.Run("Derived", func(t *testing.T) {
		ctx, release := api.StoreContext(t.Context(), time.Now().Add(short))
		defer release()
		child, cancel := context.WithCancel(ctx)
		defer cancel()
		waitDone(t, child, context.DeadlineExceeded)
		if got := context.Cause(child); !errors.Is(got, context.DeadlineExceeded) {
			t.Errorf("context.Cause(child) = %v, want %v", got, context.DeadlineExceeded)
		}
	})
	t.Run("ParentCancelled", func(t *testing.T) {
		parent, cancel := context.WithCancel(t.Context())
		ctx, release := api.StoreContext(parent, time.Now().Add(time.Hour))
		defer release()
		cancel()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Errorf("Err() after the parent's cancel = %v, want %v", err, context.Canceled)
		}
		waitDone(t, ctx, context.Canceled)
	})
	t.Run("Released", func(t *testing.T) {
		for _, waited := range []bool{false, true} {
			ctx, release := api.StoreContext(t.Context(), time.Now().Add(time.Hour))
			if waited {
				_ = ctx.Done()
			}
			release()
			if err := ctx.Err(); !errors.Is(err, context.Canceled) {
				t.Errorf("waited on before release %v: Err() after release = %v, want %v", waited, err, context.Canceled)
			}
			waitDone(t, ctx, context.Canceled)
		}
	})
	t.Run("Deadline", func(t *testing.T) {
		own := time.Now().Add(time.Hour)
		ctx, release := api.StoreContext(t.Context(), own)
		defer release()
		if got, ok := ctx.Deadline(); !ok || !got.Equal(own) {
			t.Errorf("Deadline() = %v, %v, want %v, true", got, ok, own)
		}
		earlier := time.Now().Add(time.Minute)
		parent, cancel := context.WithDeadline(t.Context(), earlier)
		defer cancel()
		ctx, release = api.StoreContext(parent, own)
		defer release()
		if got, ok := ctx.Deadline(); !ok || !got.Equal(earlier) {
			t.Errorf("Deadline() under a parent ending earlier = %v, %v, want %v, true", got, ok, earlier)
		}
	})
	t.Run("Value", func(t *testing.T) {
		type key struct{}
		ctx, release := api.StoreContext(context.WithValue(t.Context(), key{}, "v"), time.Now().Add(time.Hour))
		defer release()
		if got := ctx.Value(key{}); got != "v" {
			t.Errorf("Value(key) = %v, want the parent's %q", got, "v")
		}
	})
}
