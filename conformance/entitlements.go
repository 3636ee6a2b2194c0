package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

var entitlementTests = []subtest{
	{"EntitlementCreateGet", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		kinds := []entitlement.Entitlement{credits(agent, 1500, clock.Now()), quota(agent, 10, clock.Now()), subscription(agent, clock.Now())}
		kinds[0].Scope.Tools = []string{"query", "fetch"}
		kinds[0].Metadata = map[string]string{"plan": "pro"}
		kinds[1].ExpiresAt = ptr(clock.Now().Add(90 * 24 * time.Hour))
		for _, want := range kinds {
			got := createEntitlement(t, s, want)
			if d := cmpDiff(want, got); d != "" {
				t.Errorf("CreateEntitlement(%s) mismatch (-want +got):\n%s", want.Type, d)
			}
			if d := cmpDiff(want, getEntitlement(t, s, want.ID)); d != "" {
				t.Errorf("GetEntitlement(%s) mismatch (-want +got):\n%s", want.Type, d)
			}
		}
		evs := pendingEvents(t, s)
		if len(evs) != len(kinds) {
			t.Fatalf("PendingEvents = %v, want one entitlement.granted per entitlement", eventTypes(evs))
		}
		granted := map[any]bool{}
		for i, ev := range evs {
			if ev.Type != event.EntitlementGranted || ev.AgentID != agent || !ev.OccurredAt.Equal(clock.Now()) {
				t.Errorf("event %d = %s agent %q at %v, want %s agent %q at %v", i, ev.Type, ev.AgentID, ev.OccurredAt, event.EntitlementGranted, agent, clock.Now())
			}
			granted[eventData(t, ev)["id"]] = true
		}
		for _, e := range kinds {
			if !granted[e.ID] {
				t.Errorf("no entitlement.granted event has data id %s", e.ID)
			}
		}
	}},
	{"EntitlementCreateDuplicateID", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		e := createEntitlement(t, s, credits(newAgent(), 100, clock.Now()))
		dup := credits(newAgent(), 999, clock.Now())
		dup.ID = e.ID
		_, err := s.CreateEntitlement(t.Context(), dup)
		wantCode(t, "CreateEntitlement(existing ID)", err, store.CodeConflict)
		if d := cmpDiff(e, getEntitlement(t, s, e.ID)); d != "" {
			t.Errorf("GetEntitlement after the duplicate changed (-want +got):\n%s", d)
		}
	}},
	{"EntitlementNotFound", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		_, err := s.GetEntitlement(t.Context(), "no-such-entitlement")
		wantCode(t, "GetEntitlement(unknown)", err, store.CodeNotFound)
		_, err = s.RevokeEntitlement(t.Context(), "no-such-entitlement")
		wantCode(t, "RevokeEntitlement(unknown)", err, store.CodeNotFound)
	}},
	{"EntitlementCopies", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		e := credits(newAgent(), 100, clock.Now())
		e.Scope.Tools = []string{"query"}
		e.Metadata = map[string]string{"k": "v"}
		e.ExpiresAt = ptr(clock.Now().Add(time.Hour))
		want := createEntitlement(t, s, e)
		e.Scope.Tools[0], e.Metadata["k"] = "changed", "changed" // the argument
		got := getEntitlement(t, s, e.ID)
		got.Scope.Tools[0], got.Metadata["k"], *got.ExpiresAt = "changed", "changed", time.Time{} // a result
		if d := cmpDiff(want, getEntitlement(t, s, e.ID)); d != "" {
			t.Errorf("stored entitlement changed through a copy (-want +got):\n%s", d)
		}
	}},
	{"EntitlementTimesUTC", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		zone := time.FixedZone("UTC+5", 5*60*60)
		e := credits(newAgent(), 100, clock.Now().In(zone))
		e.ExpiresAt = ptr(clock.Now().Add(time.Hour).In(zone))
		createEntitlement(t, s, e)
		got := getEntitlement(t, s, e.ID)
		if got.CreatedAt.Location() != time.UTC || got.ExpiresAt.Location() != time.UTC {
			t.Errorf("GetEntitlement: createdAt in %v, expiresAt in %v; want both in UTC", got.CreatedAt.Location(), got.ExpiresAt.Location())
		}
		if !got.CreatedAt.Equal(e.CreatedAt) || !got.ExpiresAt.Equal(*e.ExpiresAt) {
			t.Errorf("GetEntitlement: createdAt %v, expiresAt %v; want the instants %v and %v", got.CreatedAt, got.ExpiresAt, e.CreatedAt, *e.ExpiresAt)
		}
	}},
	{"EntitlementListFilters", testListEntitlementFilters},
	{"EntitlementListPages", testListEntitlementPages},
	{"EntitlementLazyResetShown", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, q := agentWithQuota(t, s, 5, clock.Now())
		for i := range 5 {
			mustConsume(t, s, request(agent, "k"+string(rune('a'+i)), 0))
		}
		if got := getEntitlement(t, s, q.ID).Quota.Remaining; got != 0 {
			t.Fatalf("Remaining after 5 calls = %d, want 0", got)
		}
		now := clock.Advance(25 * time.Hour)
		wantReset := entitlement.PeriodDay.NextBoundary(q.Quota.Anchor, now)
		got := getEntitlement(t, s, q.ID)
		if got.Quota.Remaining != 5 || !got.Quota.ResetAt.Equal(wantReset) {
			t.Errorf("GetEntitlement after the period: remaining %d, resetAt %v; want 5, %v", got.Quota.Remaining, got.Quota.ResetAt, wantReset)
		}
		items, _, err := s.ListEntitlements(t.Context(), agent, store.EntitlementFilter{}, store.Page{})
		if err != nil || len(items) != 1 || items[0].Quota.Remaining != 5 {
			t.Errorf("ListEntitlements after the period = %+v, %v; want the quota shown reset to 5", items, err)
		}
	}},
	{"EntitlementRevoke", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		e := createEntitlement(t, s, credits(newAgent(), 100, clock.Now()))
		at := clock.Advance(time.Minute)
		got := revoke(t, s, e.ID)
		want := e
		want.Status, want.RevokedAt = entitlement.StatusRevoked, &at
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("RevokeEntitlement mismatch (-want +got):\n%s", d)
		}
		clock.Advance(time.Minute)
		again, err := s.RevokeEntitlement(t.Context(), e.ID)
		if err != nil {
			t.Fatalf("RevokeEntitlement (again): %v", err)
		}
		if d := cmpDiff(want, again); d != "" {
			t.Errorf("RevokeEntitlement (again) changed it (-want +got):\n%s", d)
		}
		if d := cmpDiff(want, getEntitlement(t, s, e.ID)); d != "" {
			t.Errorf("GetEntitlement after revoke (-want +got):\n%s", d)
		}
		types := eventTypes(pendingEvents(t, s))
		if d := cmpDiff([]event.Type{event.EntitlementGranted, event.EntitlementRevoked}, types); d != "" {
			t.Errorf("events (-want +got):\n%s", d)
		}
	}},
}

func testListEntitlementFilters(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent, c := agentWithCredits(t, s, 100, clock.Now())
	clock.Advance(time.Second)
	q := quota(agent, 10, clock.Now())
	q.Scope.Service = entitlement.AnyService
	q = createEntitlement(t, s, q)
	clock.Advance(time.Second)
	other := credits(agent, 100, clock.Now())
	other.Scope.Service = "mail"
	other = createEntitlement(t, s, other)
	clock.Advance(time.Second)
	sub := createEntitlement(t, s, subscription(agent, clock.Now()))
	createEntitlement(t, s, credits(newAgent(), 100, clock.Now())) // another agent's
	revoked := revoke(t, s, sub.ID)
	tests := []struct {
		name   string
		filter store.EntitlementFilter
		want   []entitlement.Entitlement
	}{
		{"All", store.EntitlementFilter{}, []entitlement.Entitlement{c, q, other, revoked}},
		{"Active", store.EntitlementFilter{Status: entitlement.StatusActive}, []entitlement.Entitlement{c, q, other}},
		{"Revoked", store.EntitlementFilter{Status: entitlement.StatusRevoked}, []entitlement.Entitlement{revoked}},
		{"Credits", store.EntitlementFilter{Type: entitlement.TypeCredits}, []entitlement.Entitlement{c, other}},
		{"ServiceIncludesAny", store.EntitlementFilter{Service: testService}, []entitlement.Entitlement{c, q, revoked}},
		{"ServiceMail", store.EntitlementFilter{Service: "mail"}, []entitlement.Entitlement{q, other}},
		{"ActiveCreditsMail", store.EntitlementFilter{Status: entitlement.StatusActive, Type: entitlement.TypeCredits, Service: "mail"}, []entitlement.Entitlement{other}},
		{"Nothing", store.EntitlementFilter{Type: entitlement.TypeQuota, Service: "nope", Status: entitlement.StatusRevoked}, nil},
	}
	for _, tc := range tests {
		items, next, err := s.ListEntitlements(t.Context(), agent, tc.filter, store.Page{})
		if err != nil {
			t.Errorf("ListEntitlements(%s): %v", tc.name, err)
			continue
		}
		if next != "" {
			t.Errorf("ListEntitlements(%s): next cursor %q on the only page, want \"\"", tc.name, next)
		}
		if d := cmpDiff(tc.want, items); d != "" {
			t.Errorf("ListEntitlements(%s) mismatch (-want +got):\n%s", tc.name, d)
		}
	}
	items, _, err := s.ListEntitlements(t.Context(), newAgent(), store.EntitlementFilter{}, store.Page{})
	if err != nil || len(items) != 0 {
		t.Errorf("ListEntitlements(unknown agent) = %d items, %v; want none, nil", len(items), err)
	}
}

func testListEntitlementPages(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent := newAgent()
	var want []entitlement.Entitlement
	for i := range 5 {
		e := credits(agent, int64(100+i), clock.Now())
		if i%2 == 0 {
			clock.Advance(time.Second) // some share a CreatedAt, then order by ID
		}
		want = append(want, e)
	}
	// Create in reverse order: the list is by CreatedAt then ID, not by insertion.
	for i := len(want) - 1; i >= 0; i-- {
		createEntitlement(t, s, want[i])
	}
	entitlement.SortCandidates(want) // same kind, no expiry: by CreatedAt, then ID
	got, pages := allPages(t, "ListEntitlements", 2, 6, func(p store.Page) ([]entitlement.Entitlement, string, error) {
		return s.ListEntitlements(t.Context(), agent, store.EntitlementFilter{}, p)
	})
	if pages != 3 {
		t.Errorf("5 entitlements in pages of 2 took %d pages, want 3", pages)
	}
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("entitlements over all pages (-want +got):\n%s", d)
	}
	_, _, err := s.ListEntitlements(t.Context(), agent, store.EntitlementFilter{}, store.Page{Cursor: "not a cursor!"})
	wantCode(t, "ListEntitlements(bad cursor)", err, store.CodeInvalid)
}
