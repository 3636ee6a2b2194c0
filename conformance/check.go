package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var checkTests = []subtest{
	{"CheckAnswerIsACopy", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// Every result is a copy: changing what Check or CheckAndConsume
		// returned never changes the stored entitlement.
		agent := newAgent()
		e := credits(agent, 100, clock.Now())
		e.Scope.Tools = []string{testTool}
		e.Metadata = map[string]string{"plan": "pro"}
		e.ExpiresAt = ptr(clock.Now().Add(time.Hour))
		e = createEntitlement(t, s, e)
		check, err := s.Check(t.Context(), request(agent, "k", 1))
		if err != nil || check.Outcome != store.Allowed {
			t.Fatalf("Check = %s, %v; want %s", check.Outcome, err, store.Allowed)
		}
		charged := mustConsume(t, s, request(agent, "k", 1))
		for _, got := range []*entitlement.Entitlement{&check.Entitlement, &charged.Entitlement} {
			got.Scope.Tools[0] = "other"
			got.Metadata["plan"] = "changed"
			*got.ExpiresAt = got.ExpiresAt.Add(-2 * time.Hour)
		}
		stored := getEntitlement(t, s, e.ID)
		if stored.Scope.Tools[0] != testTool || stored.Metadata["plan"] != "pro" || !stored.ExpiresAt.Equal(*e.ExpiresAt) {
			t.Errorf("changing returned results changed the stored entitlement: tools %v, metadata %v, expiresAt %v",
				stored.Scope.Tools, stored.Metadata, stored.ExpiresAt)
		}
	}},
	{"CheckNeverWrites", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, e := agentWithCredits(t, s, 100, clock.Now())
		req := request(agent, "k", 60)
		for range 2 {
			res, err := s.Check(t.Context(), req)
			if err != nil {
				t.Fatalf("Check: %v", err)
			}
			if res.Outcome != store.Allowed || res.Entitlement.ID != e.ID || res.Consumption.ID != "" {
				t.Fatalf("Check = %s %+v, want %s by %s and no consumption", res.Outcome, res.Denials, store.Allowed, e.ID)
			}
		}
		if d := cmpDiff(e, getEntitlement(t, s, e.ID)); d != "" {
			t.Errorf("Check changed the entitlement (-want +got):\n%s", d)
		}
		if got := listAllConsumptions(t, s, agent, time.Time{}); len(got) != 0 {
			t.Errorf("Check stored consumptions: %+v", got)
		}
		// The key is still unused: the real call is charged, not replayed.
		mustConsume(t, s, req)
		res, err := s.Check(t.Context(), req)
		if err != nil || res.Outcome != store.Replay || res.Consumption.ID == "" {
			t.Errorf("Check(used key) = %s, %v; want %s with the consumption", res.Outcome, err, store.Replay)
		}
		req.Cost = ptr(usd(61))
		if res, err := s.Check(t.Context(), req); err != nil || res.Outcome != store.Conflict {
			t.Errorf("Check(used key, other cost) = %s, %v; want %s", res.Outcome, err, store.Conflict)
		}
		res, err = s.Check(t.Context(), request(agent, "k2", 60))
		if err != nil || res.Outcome != store.Denied {
			t.Fatalf("Check(over the balance) = %s, %v; want %s", res.Outcome, err, store.Denied)
		}
		want := []entitlement.Denial{{EntitlementID: e.ID, Reason: entitlement.ReasonInsufficientBalance}}
		if d := cmpDiff(want, res.Denials); d != "" {
			t.Errorf("Check denials (-want +got):\n%s", d)
		}
	}},
	{"CheckLazyResetNotWritten", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent := newAgent()
		q := quota(agent, 1, clock.Now())
		q.Quota.Remaining = 0
		q = createEntitlement(t, s, q)
		clock.Advance(25 * time.Hour)
		res, err := s.Check(t.Context(), request(agent, "k", 0))
		if err != nil || res.Outcome != store.Allowed || res.Entitlement.Quota.Remaining != 1 {
			t.Fatalf("Check after the period = %s %+v, %v; want %s with the quota shown reset", res.Outcome, res.Entitlement, err, store.Allowed)
		}
		mustConsume(t, s, request(agent, "k", 0)) // the key is still unused
	}},
	{"CheckInvalid", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		_, err := s.Check(t.Context(), request(newAgent(), "", 1))
		wantCode(t, "Check(empty key)", err, store.CodeInvalid)
	}},
}
