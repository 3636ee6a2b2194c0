package memory

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

var _ store.DeliveryStore = (*Store)(nil)

// ListEndpoints implements store.DeliveryStore.
func (s *Store) ListEndpoints(_ context.Context, p store.Page) ([]store.Endpoint, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	all := slices.Collect(maps.Values(s.endpoints))
	return pageOf(all, p, listID("endpoints"), func(e store.Endpoint) position { return position{At: e.CreatedAt, ID: e.ID} }, copyEndpoint)
}

// DeleteEndpoint implements store.DeliveryStore. The endpoint's deliveries
// stay, as the contract says.
func (s *Store) DeleteEndpoint(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.endpoints[id]; !ok {
		return endpointNotFound(id)
	}
	delete(s.endpoints, id)
	return nil
}

func endpointNotFound(id string) error {
	return store.Errorf(store.CodeNotFound, "webhook endpoint %s", id)
}

// ListDeliveries implements store.DeliveryStore.
func (s *Store) ListDeliveries(_ context.Context, f store.DeliveryFilter, p store.Page) ([]store.Delivery, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var all []store.Delivery
	for _, d := range s.deliveries {
		if (f.Status == "" || d.Status == f.Status) && (f.EventType == "" || d.EventType == f.EventType) {
			all = append(all, d)
		}
	}
	list := listID("deliveries", string(f.Status), string(f.EventType))
	return pageOf(all, p, list, func(d store.Delivery) position { return position{At: d.CreatedAt, ID: d.ID} }, copyDelivery)
}

// ClaimDueDeliveries implements store.DeliveryStore. Under the store's one
// mutex the whole claim is a single atomic step.
func (s *Store) ClaimDueDeliveries(_ context.Context, now time.Time, limit int, claimTTL time.Duration, workerID string) ([]store.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// The limit earliest due rows, by when they are due.
	var due []store.Delivery
	for _, d := range s.deliveries {
		if deliveryDue(&d, now, claimTTL) {
			due = append(due, d)
		}
	}
	slices.SortFunc(due, func(a, b store.Delivery) int { return a.ScheduledAt.Compare(b.ScheduledAt) })
	out := make([]store.Delivery, 0, min(limit, len(due)))
	for _, d := range due[:min(limit, len(due))] {
		t := now.UTC()
		d.Status, d.Attempts = store.DeliveryInFlight, d.Attempts+1
		d.ClaimedBy, d.ClaimedAt, d.ClaimToken = workerID, &t, uuid.NewString()
		d.UpdatedAt = s.now().UTC()
		s.deliveries[d.ID] = d
		out = append(out, copyDelivery(d))
	}
	return out, nil
}

func deliveryDue(d *store.Delivery, now time.Time, claimTTL time.Duration) bool {
	switch d.Status {
	case store.DeliveryPending:
		return !d.ScheduledAt.After(now)
	case store.DeliveryInFlight:
		return d.ClaimedAt != nil && !d.ClaimedAt.After(now.Add(-claimTTL))
	}
	return false
}

// RecordInboundEvent implements store.DeliveryStore. It shares s.inbound
// with payment changes that carry store.PaymentChange.Inbound.
func (s *Store) RecordInboundEvent(_ context.Context, source, eventID string) (bool, time.Time, error) {
	if source == "" || eventID == "" {
		return false, time.Time{}, store.Errorf(store.CodeInvalid, "source and eventId: required")
	}
	key := unit.InboundKey(source, eventID)
	s.mu.Lock()
	defer s.mu.Unlock()
	if first, ok := s.inbound[key]; ok {
		return false, first, nil
	}
	now := s.now().UTC()
	s.inbound[key] = now
	return true, now, nil
}

func copyEndpoint(e store.Endpoint) store.Endpoint {
	e.EventTypes = slices.Clone(e.EventTypes)
	if e.EventTypes == nil {
		e.EventTypes = []event.Type{}
	}
	for _, p := range []**time.Time{&e.DisabledAt, &e.PreviousSecretExpiresAt} {
		if *p != nil {
			t := **p
			*p = &t
		}
	}
	return e
}

func copyDelivery(d store.Delivery) store.Delivery {
	d.Payload = slices.Clone(d.Payload)
	for _, p := range []**time.Time{&d.ClaimedAt, &d.LastAttemptAt} {
		if *p != nil {
			t := **p
			*p = &t
		}
	}
	return d
}
