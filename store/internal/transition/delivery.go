// Package transition holds the state changes both stores make the same way
// and in the same words: an endpoint's creation, update, disabling and
// secret rotation, a delivery's enqueue and the result of an attempt
// (DeliveryStore), the refusal of a payment change, and the key under which
// an inbound provider event, the cause of a payment change, is recorded.
// Only the adapters under store/ import it; callers use the contract in
// package store.
package transition

import (
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// CheckAttemptResult validates r for FinishDelivery.
func CheckAttemptResult(r *store.AttemptResult) error {
	switch r.Status {
	case store.DeliverySucceeded, store.DeliveryFailed, store.DeliveryDead:
	default:
		return store.Errorf(store.CodeInvalid, "status: %q is not a result of an attempt", r.Status)
	}
	if r.Status != store.DeliveryFailed && !r.RetryAt.IsZero() {
		return store.Errorf(store.CodeInvalid, "retryAt: only a failed attempt can be retried")
	}
	if r.Deferred && (r.Status != store.DeliveryFailed || r.RetryAt.IsZero()) {
		return store.Errorf(store.CodeInvalid, "deferred: needs status failed and a retryAt")
	}
	if len(r.Error) > store.MaxErrorLength {
		r.Error = r.Error[:store.MaxErrorLength]
	}
	return nil
}

// ApplyAttempt returns d after the attempt result r at now: the state change
// FinishDelivery makes, shared by the adapters.
func ApplyAttempt(d store.Delivery, r store.AttemptResult, now time.Time) store.Delivery {
	t := now.UTC()
	if r.Deferred {
		d.Status, d.ScheduledAt = store.DeliveryPending, r.RetryAt.UTC()
		d.Attempts = max(d.Attempts-1, 0)
		d.ClaimedBy, d.ClaimedAt, d.ClaimToken = "", nil, ""
		d.UpdatedAt = t
		return d
	}
	d.Status = r.Status
	if r.Status == store.DeliveryFailed && !r.RetryAt.IsZero() {
		d.Status = store.DeliveryPending
		d.ScheduledAt = r.RetryAt.UTC()
	}
	d.LastStatusCode, d.LastError = r.StatusCode, r.Error
	d.LastAttemptAt = &t
	d.ClaimedBy, d.ClaimedAt, d.ClaimToken = "", nil, ""
	d.UpdatedAt = t
	return d
}

// CheckNewDelivery validates a delivery passed to EnqueueDelivery and fills
// in the fields the store owns, at now.
func CheckNewDelivery(d *store.Delivery, now time.Time) error {
	switch {
	case d.ID == "":
		return store.Errorf(store.CodeInvalid, "id: required")
	case d.Key == "":
		return store.Errorf(store.CodeInvalid, "key: required")
	case d.EndpointID == "":
		return store.Errorf(store.CodeInvalid, "endpointId: required")
	case d.EventID == "":
		return store.Errorf(store.CodeInvalid, "eventId: required")
	case len(d.Payload) > store.MaxPayloadBytes:
		return store.Errorf(store.CodeInvalid, "payload: larger than %d KiB", store.MaxPayloadBytes>>10)
	}
	d.Status, d.Attempts = store.DeliveryPending, 0
	d.ClaimedBy, d.ClaimedAt, d.ClaimToken = "", nil, ""
	d.LastStatusCode, d.LastError, d.LastAttemptAt = 0, "", nil
	d.CreatedAt, d.UpdatedAt = now.UTC(), now.UTC()
	if d.ScheduledAt.IsZero() {
		d.ScheduledAt = now
	}
	d.ScheduledAt = d.ScheduledAt.UTC()
	return nil
}
