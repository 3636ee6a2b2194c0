package ops

import (
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// checkAttempt validates r for FinishDelivery.
func checkAttempt(r *store.AttemptResult) error {
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

// applyAttempt returns d after the attempt result r at now: the state change
// FinishDelivery makes, shared by the adapters.
func applyAttempt(d store.Delivery, r store.AttemptResult, now time.Time) store.Delivery {
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

// checkNewDelivery validates a delivery passed to EnqueueDelivery and fills
// in the fields the store owns, at now.
func checkNewDelivery(d *store.Delivery, now time.Time) error {
	for _, f := range [...]struct{ name, value string }{{"id", d.ID}, {"key", d.Key}, {"endpointId", d.EndpointID}, {"eventId", d.EventID}} {
		if f.value == "" {
			return store.Errorf(store.CodeInvalid, "%s: required", f.name)
		}
	}
	if len(d.Payload) > store.MaxPayloadBytes {
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
