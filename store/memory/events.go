package memory

import (
	"context"
	"encoding/json"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// outbox is the event outbox: events in the order they were written, and
// the IDs of those not yet dispatched.
type outbox struct {
	rows    []*outboxRow
	byID    map[string]*outboxRow
	pending int // how many rows are not dispatched
	first   int // rows[:first] are all dispatched
}

type outboxRow struct {
	event      event.Event
	dispatched bool
}

func newOutbox() outbox { return outbox{byID: make(map[string]*outboxRow)} }

// add appends events to the outbox. Callers hold s.mu.
func (o *outbox) add(events ...event.Event) {
	for _, e := range events {
		r := &outboxRow{event: e}
		o.rows = append(o.rows, r)
		o.byID[e.ID] = r
		o.pending++
	}
}

// PendingEvents returns up to limit undispatched events, oldest first.
func (s *Store) PendingEvents(_ context.Context, limit int) ([]event.Event, error) {
	if limit <= 0 {
		return nil, store.Errorf(store.CodeInvalid, "limit: must be positive")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o := &s.events
	for o.first < len(o.rows) && o.rows[o.first].dispatched {
		o.first++
	}
	out := make([]event.Event, 0, min(limit, o.pending))
	for _, r := range o.rows[o.first:] {
		if len(out) == limit {
			break
		}
		if !r.dispatched {
			e := r.event
			e.Data = append(json.RawMessage(nil), r.event.Data...)
			out = append(out, e)
		}
	}
	return out, nil
}

// MarkEventsDispatched marks events dispatched; unknown IDs are ignored.
func (s *Store) MarkEventsDispatched(_ context.Context, ids []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if r := s.events.byID[id]; r != nil && !r.dispatched {
			r.dispatched = true
			s.events.pending--
		}
	}
	return nil
}
