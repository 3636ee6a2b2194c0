package webhook

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// Outbox is the part of store.EntitlementStore the fan-out reads.
type Outbox interface {
	PendingEvents(ctx context.Context, limit int) ([]event.Event, error)
	MarkEventsDispatched(ctx context.Context, ids []string) error
}

// fanOutBatch is how many outbox events one FanOut call takes.
const fanOutBatch = 100

// deliveryNamespace derives delivery IDs from their keys, so a fan-out
// repeated after a crash also proposes the same ID.
var deliveryNamespace = uuid.MustParse("5f0c7a2e-3b1d-4c8e-9a6f-2d4b8e1c7a30")

// DeliveryKey is the idempotency key of the delivery of event eventID to
// endpoint endpointID.
func DeliveryKey(eventID, endpointID string) string { return eventID + "/" + endpointID }

// FanOut turns up to 100 pending outbox events into deliveries, one per
// endpoint subscribed to the event's type, and then marks the events
// dispatched. It is safe to repeat and to run in several processes at once:
// a crash between enqueueing and marking re-enqueues the same keys, which
// EnqueueDelivery answers with the deliveries already stored. It returns the
// number of events handled. Endpoints registered later do not receive
// earlier events.
func FanOut(ctx context.Context, outbox Outbox, deliveries store.DeliveryStore) (int, error) {
	events, err := outbox.PendingEvents(ctx, fanOutBatch)
	if err != nil || len(events) == 0 {
		return 0, err
	}
	endpoints, err := allEndpoints(ctx, deliveries)
	if err != nil {
		return 0, err
	}
	done := make([]string, 0, len(events))
	for i := range events {
		e := &events[i]
		body, err := Payload(e)
		if err != nil {
			return 0, fmt.Errorf("webhook payload of event %s: %w", e.ID, err)
		}
		for j := range endpoints {
			ep := &endpoints[j]
			if !ep.Subscribes(e.Type) {
				continue
			}
			key := DeliveryKey(e.ID, ep.ID)
			_, _, err := deliveries.EnqueueDelivery(ctx, store.Delivery{
				ID: uuid.NewSHA1(deliveryNamespace, []byte(key)).String(), Key: key,
				EndpointID: ep.ID, EventID: e.ID, EventType: e.Type, Payload: body,
			})
			if err != nil {
				return 0, fmt.Errorf("enqueue delivery of event %s to endpoint %s: %w", e.ID, ep.ID, err)
			}
		}
		done = append(done, e.ID)
	}
	if err := outbox.MarkEventsDispatched(ctx, done); err != nil {
		return 0, err
	}
	return len(done), nil
}

// allEndpoints reads every endpoint, page by page.
func allEndpoints(ctx context.Context, s store.DeliveryStore) ([]store.Endpoint, error) {
	var out []store.Endpoint
	cursor := ""
	for {
		items, next, err := s.ListEndpoints(ctx, store.Page{Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, items...)
		if next == "" {
			return out, nil
		}
		cursor = next
	}
}
