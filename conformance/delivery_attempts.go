package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// attemptTests: what FinishDelivery does with the result of an attempt
// (retry later, defer, terminal states) and RetryDelivery by hand.
var attemptTests = []deliveryTest{
	{"Attempt/FailedReturnsToPendingLater", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		retryAt := Start.Add(5 * time.Minute)
		got, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{
			Status: store.DeliveryFailed, RetryAt: retryAt, StatusCode: 500, Error: "server error"})
		if err != nil {
			t.Fatalf("FinishDelivery(failed, retry): %v", err)
		}
		if got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(retryAt) || got.LastError != "server error" || got.LastStatusCode != 500 {
			t.Errorf("after a failed attempt = status %s scheduled %v error %q code %d; want pending at %v, the error and 500",
				got.Status, got.ScheduledAt, got.LastError, got.LastStatusCode, retryAt)
		}
		if got := claim(t, s, retryAt.Add(-time.Second), 1, time.Minute, "w1"); len(got) != 0 {
			t.Errorf("claim before the retry time = %v, want none", ids(got))
		}
		if got := claim(t, s, retryAt, 1, time.Minute, "w1"); len(got) != 1 || got[0].Attempts != 2 {
			t.Errorf("claim at the retry time = %+v, want the delivery at attempt 2", got)
		}
	}},
	{"Attempt/DeferredGivesTheAttemptBack", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		if _, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{
			Status: store.DeliveryFailed, RetryAt: Start.Add(time.Minute), Error: "timeout"}); err != nil {
			t.Fatalf("FinishDelivery(failed): %v", err)
		}
		c = claim(t, s, Start.Add(time.Minute), 1, time.Minute, "w1")[0] // attempt 2
		retryAt := Start.Add(10 * time.Minute)
		got, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{
			Status: store.DeliveryFailed, RetryAt: retryAt, Deferred: true})
		if err != nil {
			t.Fatalf("FinishDelivery(deferred): %v", err)
		}
		if got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(retryAt) || got.Attempts != 1 ||
			got.LastError != "timeout" || got.ClaimToken != "" {
			t.Errorf("after a deferral = status %s scheduled %v attempts %d error %q claim %q; want pending at %v, attempts 1, the last real error kept, no claim",
				got.Status, got.ScheduledAt, got.Attempts, got.LastError, got.ClaimToken, retryAt)
		}
		if got := claim(t, s, retryAt, 1, time.Minute, "w1"); len(got) != 1 || got[0].Attempts != 2 {
			t.Errorf("claim after the deferral = %+v, want the delivery at attempt 2 again", got)
		}
		for _, bad := range []store.AttemptResult{
			{Status: store.DeliveryFailed, Deferred: true},
			{Status: store.DeliveryDead, Deferred: true},
		} {
			_, err := s.FinishDelivery(ctx, d.ID, "any", bad)
			wantCode(t, "FinishDelivery(deferred without a retry time, or not failed)", err, store.CodeInvalid)
		}
	}},
	{"Attempt/TerminalAndManualRetry", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		for _, status := range []store.DeliveryStatus{store.DeliveryFailed, store.DeliveryDead} {
			d := enqueue(t, s, newDelivery("ep1", event.PaymentFailed))
			c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
			got, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{Status: status, Error: "gone"})
			if err != nil || got.Status != status {
				t.Fatalf("FinishDelivery(%s) = %s, %v; want %s", status, got.Status, err, status)
			}
			if got := claim(t, s, clock.Now().Add(24*time.Hour), 1, 48*time.Hour, "w1"); len(got) != 0 {
				t.Errorf("claim of a %s delivery = %v, want none", status, ids(got))
			}
			at := clock.Advance(time.Hour)
			got, err = s.RetryDelivery(ctx, d.ID)
			if err != nil || got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(at) || got.Attempts != 1 {
				t.Fatalf("RetryDelivery(%s) = %s at %v attempts %d, %v; want pending at %v, attempts 1", status, got.Status, got.ScheduledAt, got.Attempts, err, at)
			}
			_, err = s.RetryDelivery(ctx, d.ID)
			wantCode(t, "RetryDelivery(pending)", err, store.CodeConflict)
			again := claim(t, s, at, 1, time.Minute, "w1")
			if len(again) != 1 || again[0].ID != d.ID {
				t.Fatalf("claim after RetryDelivery = %v, want [%s]", ids(again), d.ID)
			}
			_, err = s.RetryDelivery(ctx, d.ID)
			wantCode(t, "RetryDelivery(in_flight)", err, store.CodeConflict)
			if _, err := s.FinishDelivery(ctx, d.ID, again[0].ClaimToken, store.AttemptResult{Status: store.DeliverySucceeded}); err != nil {
				t.Fatalf("FinishDelivery after the manual retry: %v", err)
			}
		}
		_, err := s.RetryDelivery(ctx, "missing")
		wantCode(t, "RetryDelivery(missing)", err, store.CodeNotFound)
	}},
	{"Attempt/InvalidResult", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		_, err := s.FinishDelivery(context.Background(), d.ID, c.ClaimToken, store.AttemptResult{Status: store.DeliveryPending})
		wantCode(t, "FinishDelivery(pending)", err, store.CodeInvalid)
	}},
}
