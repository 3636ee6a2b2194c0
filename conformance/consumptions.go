package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var consumptionTests = []subtest{
	{"ListConsumptions", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, _ := agentWithCredits(t, s, 1000, clock.Now())
		other := newAgent()
		createEntitlement(t, s, credits(other, 1000, clock.Now()))
		mustConsume(t, s, request(other, "x", 1))
		var all []entitlement.Consumption
		for i := range 5 {
			if i != 2 {
				clock.Advance(time.Second) // calls 1 and 2 share an instant
			}
			all = append(all, mustConsume(t, s, request(agent, fmt.Sprint("k", i), int64(i+1))).Consumption)
		}
		if all[1].ID > all[2].ID { // same instant: ordered by ID
			all[1], all[2] = all[2], all[1]
		}
		if d := cmpDiff(all, listAllConsumptions(t, s, agent, time.Time{})); d != "" {
			t.Errorf("ListConsumptions (all, pages of 2) mismatch (-want +got):\n%s", d)
		}
		since := all[3].OccurredAt
		if d := cmpDiff(all[3:], listAllConsumptions(t, s, agent, since)); d != "" {
			t.Errorf("ListConsumptions(since %v) mismatch (-want +got):\n%s", since, d)
		}
		items, next, err := s.ListConsumptions(t.Context(), agent, since.Add(time.Hour), store.Page{})
		if err != nil || len(items) != 0 || next != "" {
			t.Errorf("ListConsumptions(since the future) = %d items, next %q, %v; want none", len(items), next, err)
		}
		_, _, err = s.ListConsumptions(t.Context(), agent, time.Time{}, store.Page{Cursor: "%%%"})
		wantCode(t, "ListConsumptions(bad cursor)", err, store.CodeInvalid)
		// A cursor belongs to its list: another agent's list, or the same
		// list with another since, refuses it.
		_, cursor, err := s.ListConsumptions(t.Context(), agent, time.Time{}, store.Page{Limit: 1})
		if err != nil || cursor == "" {
			t.Fatalf("ListConsumptions(limit 1) = next %q, %v; want a cursor", cursor, err)
		}
		_, _, err = s.ListConsumptions(t.Context(), other, time.Time{}, store.Page{Cursor: cursor})
		wantCode(t, "ListConsumptions(another agent's cursor)", err, store.CodeInvalid)
		_, _, err = s.ListConsumptions(t.Context(), agent, since, store.Page{Cursor: cursor})
		wantCode(t, "ListConsumptions(a cursor of another since)", err, store.CodeInvalid)
	}},
}

// listAllConsumptions reads every page (of 2) of an agent's consumptions since since.
func listAllConsumptions(t *testing.T, s store.EntitlementStore, agentID string, since time.Time) []entitlement.Consumption {
	t.Helper()
	return listConsumptionPages(t, s, agentID, since, 2)
}

// listConsumptionPages reads every page (of limit) of an agent's consumptions since since.
func listConsumptionPages(t *testing.T, s store.EntitlementStore, agentID string, since time.Time, limit int) []entitlement.Consumption {
	t.Helper()
	out, _ := allPages(t, "ListConsumptions", limit, 10000, func(p store.Page) ([]entitlement.Consumption, string, error) {
		return s.ListConsumptions(t.Context(), agentID, since, p)
	})
	return out
}
