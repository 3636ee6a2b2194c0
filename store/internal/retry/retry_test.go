package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store/internal/retry"
)

var errBusy = errors.New("busy")

func always(error) bool { return true }

func TestRun(t *testing.T) {
	p := retry.Policy{First: time.Millisecond, Max: 4 * time.Millisecond, Budget: 10 * time.Second}
	t.Run("RetriesUntilSuccess", func(t *testing.T) {
		n := 0
		err, stop := retry.Run(t.Context(), p, func() error {
			if n++; n < 4 {
				return errBusy
			}
			return nil
		}, always)
		if err != nil || stop != retry.Done || n != 4 {
			t.Errorf("Run = %v, %v after %d attempts; want nil, Done after 4", err, stop, n)
		}
	})
	t.Run("NotRetryable", func(t *testing.T) {
		n := 0
		err, stop := retry.Run(t.Context(), p, func() error { n++; return errBusy }, func(error) bool { return false })
		if !errors.Is(err, errBusy) || stop != retry.Done || n != 1 {
			t.Errorf("Run = %v, %v after %d attempts; want errBusy, Done after 1", err, stop, n)
		}
	})
	t.Run("BudgetEnds", func(t *testing.T) {
		p := p
		p.Budget = 20 * time.Millisecond
		err, stop := retry.Run(t.Context(), p, func() error { return errBusy }, always)
		if !errors.Is(err, errBusy) || stop != retry.Exhausted {
			t.Errorf("Run = %v, %v; want errBusy, Exhausted", err, stop)
		}
	})
	// The caller's deadline ends the retries: a wait that would end after
	// it is not started, whatever the budget (PostgreSQL's loop once waited
	// past it).
	t.Run("HonoursCallerDeadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		p := p
		p.First, p.Max, p.Budget = time.Hour, time.Hour, 10*time.Hour
		n := 0
		err, stop := retry.Run(ctx, p, func() error { n++; return errBusy }, always)
		if !errors.Is(err, errBusy) || stop != retry.Exhausted || n != 1 {
			t.Errorf("Run = %v, %v after %d attempts; want errBusy, Exhausted after 1 (no wait past the deadline)", err, stop, n)
		}
	})
	t.Run("Cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		p := p
		p.First, p.Max, p.Budget = time.Hour, time.Hour, 3*time.Hour
		n := 0
		err, stop := retry.Run(ctx, p, func() error {
			n++
			time.AfterFunc(10*time.Millisecond, cancel) // while Run waits
			return errBusy
		}, always)
		if !errors.Is(err, context.Canceled) || stop != retry.Cancelled || n != 1 {
			t.Errorf("Run = %v, %v after %d; want context.Canceled after 1", err, stop, n)
		}
	})
}
