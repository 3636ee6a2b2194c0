package firestore

import (
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// The documents of webhook endpoints, deliveries and inbound event markers.

// The webhook collections, before the prefix (delivery_inbound is colInbound).
const (
	colEndpoints    = "webhook_endpoints"
	colDeliveries   = "delivery_outbound"
	colDeliveryKeys = "delivery_outbound_idempotency"
)

func endpointFields(e *store.Endpoint) []field {
	return []field{
		str("id", &e.ID), str("url", &e.URL), strs("eventTypes", &e.EventTypes), str("secret", &e.Secret),
		opt(str("previousSecret", &e.PreviousSecret)), ptr("previousSecretExpiresAt", &e.PreviousSecretExpiresAt, instant),
		boolean("disabled", &e.Disabled), opt(str("disabledReason", &e.DisabledReason)), ptr("disabledAt", &e.DisabledAt, instant),
		instant("createdAt", &e.CreatedAt),
	}
}

func endpointDoc(e *store.Endpoint) map[string]any { return encode(endpointFields(e)) }

func endpointFrom(snap *firestore.DocumentSnapshot) (store.Endpoint, error) {
	e, err := decoder(endpointFields)(snap)
	if e.EventTypes == nil {
		e.EventTypes = []event.Type{}
	}
	return e, err
}

// deliveryFields: the payload is a bytes field, so Firestore keeps the
// exact bytes, whatever they are.
func deliveryFields(d *store.Delivery) []field {
	return []field{
		str("id", &d.ID), str("key", &d.Key), str("endpointId", &d.EndpointID), str("eventId", &d.EventID),
		str("eventType", &d.EventType), blob("payload", &d.Payload), str("status", &d.Status),
		integer("attempts", &d.Attempts), instant("scheduledAt", &d.ScheduledAt),
		opt(str("claimedBy", &d.ClaimedBy)), ptr("claimedAt", &d.ClaimedAt, instant), opt(str("claimToken", &d.ClaimToken)),
		opt(integer("lastStatusCode", &d.LastStatusCode)), opt(str("lastError", &d.LastError)),
		ptr("lastAttemptAt", &d.LastAttemptAt, instant), instant("createdAt", &d.CreatedAt), instant("updatedAt", &d.UpdatedAt),
	}
}

func deliveryDoc(d *store.Delivery) map[string]any { return encode(deliveryFields(d)) }

func deliveryFrom(snap *firestore.DocumentSnapshot) (store.Delivery, error) {
	var d store.Delivery
	f := read(snap)
	f.decode(deliveryFields(&d))
	if !d.Status.Valid() {
		f.corrupt("status", "unknown delivery status %q", d.Status)
	}
	return d, f.err
}

// inboundDoc is the marker of an inbound provider event; payment changes
// with store.PaymentChange.Inbound write the same document.
func inboundDoc(source, eventID string, firstSeenAt time.Time) map[string]any {
	return map[string]any{"source": source, "eventId": eventID, "firstSeenAt": stamp(firstSeenAt)}
}
