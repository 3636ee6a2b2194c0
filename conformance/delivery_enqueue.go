package conformance

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// enqueueTests: EnqueueDelivery stores the exact payload, is idempotent on
// the key, and GetDelivery reads it back.
var enqueueTests = []deliveryTest{
	{"Enqueue/StoresExactPayload", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		d.Payload = append(d.Payload, 0, 0xff, '\n')
		stored := enqueue(t, s, d)
		want := d
		want.Status, want.ScheduledAt, want.CreatedAt, want.UpdatedAt = store.DeliveryPending, Start, Start, Start
		if diff := cmp.Diff(want, stored); diff != "" {
			t.Errorf("EnqueueDelivery (-want +got):\n%s", diff)
		}
		got, err := s.GetDelivery(context.Background(), d.ID)
		if err != nil {
			t.Fatalf("GetDelivery: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetDelivery (-want +got):\n%s", diff)
		}
		if !bytes.Equal(got.Payload, d.Payload) {
			t.Errorf("GetDelivery payload = %q, want the exact bytes %q", got.Payload, d.Payload)
		}
		_, err = s.GetDelivery(context.Background(), "missing")
		wantCode(t, "GetDelivery(missing)", err, store.CodeNotFound)
	}},
	{"Enqueue/IdempotentOnKey", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		first := enqueue(t, s, d)
		clock.Advance(time.Minute)
		again := d
		again.ID = uuid.NewString() // a retrying caller may mint a new ID
		got, created, err := s.EnqueueDelivery(context.Background(), again)
		if err != nil || created {
			t.Fatalf("EnqueueDelivery with the same key = created %v, %v; want created false", created, err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("EnqueueDelivery replay (-first +got):\n%s", diff)
		}
		other := newDelivery("ep2", event.PaymentSucceeded)
		other.Key = d.Key
		_, _, err = s.EnqueueDelivery(context.Background(), other)
		wantCode(t, "EnqueueDelivery with the key of another event", err, store.CodeConflict)
		if _, err := s.GetDelivery(context.Background(), again.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetDelivery(replayed ID) error = %v, want not found", err)
		}
	}},
	{"Enqueue/Invalid", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		d.Key = ""
		_, _, err := s.EnqueueDelivery(context.Background(), d)
		wantCode(t, "EnqueueDelivery without a key", err, store.CodeInvalid)
	}},
}
