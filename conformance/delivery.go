package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// TestSecret is a valid endpoint secret for tests.
const TestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// newEndpoint creates an endpoint subscribed to types (none: every type).
func newEndpoint(t *testing.T, s store.DeliveryStore, types ...event.Type) store.Endpoint {
	t.Helper()
	e, err := s.CreateEndpoint(context.Background(), store.Endpoint{
		ID: uuid.NewString(), URL: "https://example.com/hooks", EventTypes: types, Secret: TestSecret,
	})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return e
}

// newDelivery returns a delivery of a new event to endpoint, keyed like the fan-out keys it.
func newDelivery(endpointID string, typ event.Type) store.Delivery {
	eventID := uuid.NewString()
	return store.Delivery{
		ID: uuid.NewString(), Key: eventID + ":" + endpointID, EndpointID: endpointID,
		EventID: eventID, EventType: typ,
		Payload: []byte(`{"type":"` + string(typ) + `", "data" : {"z":1,"a":[1.50,"é"]}}`),
	}
}

// enqueue enqueues d and fails the test unless it was created.
func enqueue(t *testing.T, s store.DeliveryStore, d store.Delivery) store.Delivery {
	t.Helper()
	got, created, err := s.EnqueueDelivery(context.Background(), d)
	if err != nil || !created {
		t.Fatalf("EnqueueDelivery(%s) = created %v, %v; want created", d.Key, created, err)
	}
	return got
}

// claim claims up to limit deliveries due at now for worker, failing the
// test on an error.
func claim(t *testing.T, s store.DeliveryStore, now time.Time, limit int, ttl time.Duration, worker string) []store.Delivery {
	t.Helper()
	return must(s.ClaimDueDeliveries(context.Background(), now, limit, ttl, worker))(t, "ClaimDueDeliveries(%s, %d)", now, limit)
}

// ids returns the IDs of ds, in order.
func ids(ds []store.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// cmpEmpty treats nil and empty slices as equal.
var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

// listAllDeliveries lists every delivery that f matches, in pages of 2.
func listAllDeliveries(t *testing.T, s store.DeliveryStore, f store.DeliveryFilter) []store.Delivery {
	t.Helper()
	out, _ := allPages(t, fmt.Sprintf("ListDeliveries(%+v)", f), 2, 12, func(p store.Page) ([]store.Delivery, string, error) {
		return s.ListDeliveries(context.Background(), f, p)
	})
	return out
}
