package firestore

import (
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// This file maps webhook endpoints, deliveries and inbound event markers to
// and from their documents, field by field.

// The webhook collections, before the prefix (delivery_inbound is colInbound).
const (
	colEndpoints    = "webhook_endpoints"
	colDeliveries   = "delivery_outbound"
	colDeliveryKeys = "delivery_outbound_idempotency"
)

func endpointDoc(e *store.Endpoint) map[string]any {
	types := make([]string, len(e.EventTypes))
	for i, t := range e.EventTypes {
		types[i] = string(t)
	}
	d := map[string]any{
		"id":         e.ID,
		"url":        e.URL,
		"eventTypes": types,
		"secret":     e.Secret,
		"disabled":   e.Disabled,
		"createdAt":  stamp(e.CreatedAt),
	}
	putStr(d, "previousSecret", e.PreviousSecret)
	putTime(d, "previousSecretExpiresAt", e.PreviousSecretExpiresAt)
	putStr(d, "disabledReason", e.DisabledReason)
	putTime(d, "disabledAt", e.DisabledAt)
	return d
}

func endpointFrom(snap *firestore.DocumentSnapshot) (store.Endpoint, error) {
	f := read(snap)
	e := store.Endpoint{
		ID:                      f.str("id"),
		URL:                     f.str("url"),
		Secret:                  f.str("secret"),
		PreviousSecret:          f.optStr("previousSecret"),
		PreviousSecretExpiresAt: f.optInstant("previousSecretExpiresAt"),
		Disabled:                f.boolean("disabled"),
		DisabledReason:          f.optStr("disabledReason"),
		DisabledAt:              f.optInstant("disabledAt"),
		CreatedAt:               f.instant("createdAt"),
		EventTypes:              []event.Type{},
	}
	for _, t := range f.strs("eventTypes") {
		e.EventTypes = append(e.EventTypes, event.Type(t))
	}
	return e, f.err
}

// deliveryDoc stores the payload as a bytes field: Firestore keeps the exact
// bytes, whatever they are.
func deliveryDoc(d *store.Delivery) map[string]any {
	doc := map[string]any{
		"id":          d.ID,
		"key":         d.Key,
		"endpointId":  d.EndpointID,
		"eventId":     d.EventID,
		"eventType":   string(d.EventType),
		"payload":     d.Payload,
		"status":      string(d.Status),
		"attempts":    int64(d.Attempts),
		"scheduledAt": stamp(d.ScheduledAt),
		"createdAt":   stamp(d.CreatedAt),
		"updatedAt":   stamp(d.UpdatedAt),
	}
	putStr(doc, "claimedBy", d.ClaimedBy)
	putTime(doc, "claimedAt", d.ClaimedAt)
	putStr(doc, "claimToken", d.ClaimToken)
	if d.LastStatusCode != 0 {
		doc["lastStatusCode"] = int64(d.LastStatusCode)
	}
	putStr(doc, "lastError", d.LastError)
	putTime(doc, "lastAttemptAt", d.LastAttemptAt)
	return doc
}

func deliveryFrom(snap *firestore.DocumentSnapshot) (store.Delivery, error) {
	f := read(snap)
	d := store.Delivery{
		ID:            f.str("id"),
		Key:           f.str("key"),
		EndpointID:    f.str("endpointId"),
		EventID:       f.str("eventId"),
		EventType:     event.Type(f.str("eventType")),
		Payload:       f.blob("payload"),
		Status:        store.DeliveryStatus(f.str("status")),
		Attempts:      int(f.integer("attempts")),
		ScheduledAt:   f.instant("scheduledAt"),
		ClaimedBy:     f.optStr("claimedBy"),
		ClaimedAt:     f.optInstant("claimedAt"),
		ClaimToken:    f.optStr("claimToken"),
		LastError:     f.optStr("lastError"),
		LastAttemptAt: f.optInstant("lastAttemptAt"),
		CreatedAt:     f.instant("createdAt"),
		UpdatedAt:     f.instant("updatedAt"),
	}
	if f.has("lastStatusCode") {
		d.LastStatusCode = int(f.integer("lastStatusCode"))
	}
	if f.err == nil && !d.Status.Valid() {
		f.corrupt("status", "unknown delivery status %q", d.Status)
	}
	return d, f.err
}

// blob reads a required bytes field.
func (f *fields) blob(field string) []byte {
	v, ok := f.get(field)
	if !ok {
		return []byte{}
	}
	b, ok := v.([]byte)
	if !ok {
		f.corrupt(field, "is %T, want bytes", v)
	}
	return b
}

// inboundDoc is the marker of an inbound provider event; payment changes
// with store.PaymentChange.Inbound write the same document.
func inboundDoc(source, eventID string, firstSeenAt time.Time) map[string]any {
	return map[string]any{"source": source, "eventId": eventID, "firstSeenAt": stamp(firstSeenAt)}
}
