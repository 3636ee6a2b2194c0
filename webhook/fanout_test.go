package webhook_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/webhook"
)

// outbox is an in-memory webhook.Outbox whose next MarkEventsDispatched
// can be made to fail, as if the process died after enqueueing.
type outbox struct {
	mu         sync.Mutex
	events     []event.Event
	dispatched map[string]bool
	failMark   bool
}

func (o *outbox) PendingEvents(_ context.Context, limit int) ([]event.Event, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []event.Event
	for _, e := range o.events {
		if !o.dispatched[e.ID] && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}

func (o *outbox) MarkEventsDispatched(_ context.Context, ids []string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failMark {
		o.failMark = false
		return errors.New("crashed")
	}
	for _, id := range ids {
		o.dispatched[id] = true
	}
	return nil
}

func TestFanOut_OneDeliveryPerSubscribedEndpoint(t *testing.T) {
	ctx := context.Background()
	s := memory.New(memory.WithClock(conformance.NewClock().Now))
	mk := func(types ...event.Type) store.Endpoint {
		ep, err := s.CreateEndpoint(ctx, store.Endpoint{ID: uuid.NewString(), URL: "https://example.com", EventTypes: types, Secret: webhook.NewSecret()})
		if err != nil {
			t.Fatalf("CreateEndpoint: %v", err)
		}
		return ep
	}
	all, payments, disabled := mk(), mk(event.PaymentSucceeded), mk()
	if _, err := s.DisableEndpoint(ctx, disabled.ID, "test"); err != nil {
		t.Fatalf("DisableEndpoint: %v", err)
	}
	ob := &outbox{dispatched: map[string]bool{}, failMark: true, events: []event.Event{
		{ID: "e1", Type: event.PaymentSucceeded, OccurredAt: conformance.Start, Data: []byte(`{"a":1}`)},
		{ID: "e2", Type: event.EntitlementGranted, OccurredAt: conformance.Start.Add(time.Second), Data: []byte(`{"b":2}`)},
	}}
	if _, err := webhook.FanOut(ctx, ob, s); err == nil {
		t.Fatalf("FanOut with a failing mark: got nil error")
	}
	n, err := webhook.FanOut(ctx, ob, s) // the retry after the "crash"
	if err != nil || n != 2 {
		t.Fatalf("FanOut = %d, %v; want 2 events", n, err)
	}
	if n, err := webhook.FanOut(ctx, ob, s); err != nil || n != 0 {
		t.Errorf("FanOut with nothing pending = %d, %v; want 0", n, err)
	}
	ds, _, err := s.ListDeliveries(ctx, store.DeliveryFilter{}, store.Page{})
	if err != nil {
		t.Fatalf("ListDeliveries: %v", err)
	}
	var got []string
	for _, d := range ds {
		got = append(got, d.EventID+"→"+d.EndpointID)
	}
	want := []string{"e1→" + all.ID, "e1→" + payments.ID, "e2→" + all.ID}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("deliveries = %v, want %v (one per subscribed, enabled endpoint, no duplicates)", got, want)
	}
}
