package conformance

import (
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

var eventTests = []subtest{
	{"EventsOutbox", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		ctx := t.Context()
		agent := newAgent()
		var ids []string
		for range 4 {
			ids = append(ids, createEntitlement(t, s, credits(agent, 1, clock.Now())).ID)
			clock.Advance(time.Second)
		}
		evs := pendingEvents(t, s)
		if len(evs) != 4 {
			t.Fatalf("PendingEvents = %d events, want 4", len(evs))
		}
		seen := map[string]bool{}
		for i, ev := range evs {
			if _, err := uuid.Parse(ev.ID); err != nil || seen[ev.ID] {
				t.Errorf("event %d ID %q: want a unique UUID (%v)", i, ev.ID, err)
			}
			seen[ev.ID] = true
			if got := eventData(t, ev)["id"]; got != ids[i] {
				t.Errorf("event %d is about %v, want %s (oldest first)", i, got, ids[i])
			}
		}
		first, err := s.PendingEvents(ctx, 2)
		if err != nil {
			t.Fatalf("PendingEvents(2): %v", err)
		}
		if d := cmpDiff(evs[:2], first); d != "" {
			t.Errorf("PendingEvents(2) mismatch (-want +got):\n%s", d)
		}
		if err := s.MarkEventsDispatched(ctx, []string{evs[0].ID, evs[2].ID, "no-such-event"}); err != nil {
			t.Fatalf("MarkEventsDispatched: %v", err)
		}
		if d := cmpDiff([]event.Event{evs[1], evs[3]}, pendingEvents(t, s)); d != "" {
			t.Errorf("PendingEvents after marking 0 and 2 (-want +got):\n%s", d)
		}
		if err := s.MarkEventsDispatched(ctx, []string{evs[0].ID, evs[1].ID, evs[3].ID}); err != nil {
			t.Fatalf("MarkEventsDispatched (again): %v", err)
		}
		if got := pendingEvents(t, s); len(got) != 0 {
			t.Errorf("PendingEvents after marking all = %v, want none", eventTypes(got))
		}
	}},
	{"EventsDepleted", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, c := agentWithCredits(t, s, 100, clock.Now())
		q := quota(agent, 1, clock.Now())
		q.Scope.Service = "other"
		q = createEntitlement(t, s, q)
		if err := s.MarkEventsDispatched(t.Context(), eventIDs(pendingEvents(t, s))); err != nil {
			t.Fatalf("MarkEventsDispatched: %v", err)
		}
		mustConsume(t, s, request(agent, "k1", 60))
		if got := pendingEvents(t, s); len(got) != 0 {
			t.Fatalf("after a charge that left 40 cents: events %v, want none", eventTypes(got))
		}
		mustConsume(t, s, request(agent, "k2", 40))           // balance 0: depleted
		res := checkAndConsume(t, s, request(agent, "k3", 0)) // a free call on an empty balance depletes nothing new
		if res.Outcome != store.Consumed {
			t.Fatalf("zero-cost call on an empty balance = %s, want consumed", res.Outcome)
		}
		clock.Advance(time.Second) // events are listed by time: keep the two apart
		qreq := entitlement.ConsumeRequest{AgentID: agent, Service: "other", Tool: testTool, IdempotencyKey: "q1"}
		mustConsume(t, s, qreq) // last unit of the quota: depleted
		evs := pendingEvents(t, s)
		if got, want := eventTypes(evs), []event.Type{event.EntitlementDepleted, event.EntitlementDepleted}; !slices.Equal(got, want) {
			t.Fatalf("events = %v, want %v", got, want)
		}
		for i, id := range []string{c.ID, q.ID} {
			if got := eventData(t, evs[i])["id"]; got != id {
				t.Errorf("depleted event %d is about %v, want %s", i, got, id)
			}
		}
	}},
	{"Ping", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		if err := s.Ping(t.Context()); err != nil {
			t.Errorf("Ping: %v", err)
		}
	}},
}
