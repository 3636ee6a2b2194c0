package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

var accountTests = []subtest{
	{"AccountUpsertKeepsCreatedAt", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		ctx := t.Context()
		agent := newAgent()
		created := clock.Now()
		got, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: agent, DisplayName: "Ada", Metadata: map[string]string{"team": "a"}})
		if err != nil {
			t.Fatalf("UpsertAccount (new): %v", err)
		}
		want := entitlement.Account{AgentID: agent, DisplayName: "Ada", Metadata: map[string]string{"team": "a"}, CreatedAt: created, UpdatedAt: created}
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("UpsertAccount (new) mismatch (-want +got):\n%s", d)
		}
		got.Metadata["team"] = "mutated" // a returned copy must not reach the store
		if stored, err := s.GetAccount(ctx, agent); err != nil || stored.Metadata["team"] != "a" {
			t.Errorf("GetAccount after changing a returned copy = %+v, %v; want metadata team=a", stored, err)
		}

		updated := clock.Advance(time.Hour)
		got, err = s.UpsertAccount(ctx, entitlement.Account{AgentID: agent, DisplayName: "Ada L.", Metadata: map[string]string{"team": "b"}})
		if err != nil {
			t.Fatalf("UpsertAccount (update): %v", err)
		}
		want = entitlement.Account{AgentID: agent, DisplayName: "Ada L.", Metadata: map[string]string{"team": "b"}, CreatedAt: created, UpdatedAt: updated}
		if d := cmpDiff(want, got); d != "" {
			t.Errorf("UpsertAccount (update) mismatch (-want +got):\n%s", d)
		}

		clock.Advance(time.Hour)
		again, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: agent, DisplayName: "Ada L.", Metadata: map[string]string{"team": "b"}})
		if err != nil {
			t.Fatalf("UpsertAccount (repeat): %v", err)
		}
		if again.AgentID != agent || !again.CreatedAt.Equal(created) || again.DisplayName != "Ada L." {
			t.Errorf("UpsertAccount (repeat) = %+v, want the same account with CreatedAt %v", again, created)
		}
		stored, err := s.GetAccount(ctx, agent)
		if err != nil {
			t.Fatalf("GetAccount: %v", err)
		}
		if d := cmpDiff(again, stored); d != "" {
			t.Errorf("GetAccount mismatch with the last upsert (-want +got):\n%s", d)
		}
	}},
	{"AccountUpsertUnchangedKeepsUpdatedAt", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		// An upsert that changes nothing writes nothing, not even UpdatedAt
		// (Firestore once bumped it; memory and PostgreSQL did not).
		ctx := t.Context()
		agent := newAgent()
		a := entitlement.Account{AgentID: agent, DisplayName: "Ada", Metadata: map[string]string{"team": "a"}}
		first, err := s.UpsertAccount(ctx, a)
		if err != nil {
			t.Fatalf("UpsertAccount (new): %v", err)
		}
		clock.Advance(time.Hour)
		again, err := s.UpsertAccount(ctx, a)
		if err != nil {
			t.Fatalf("UpsertAccount (repeat): %v", err)
		}
		if d := cmpDiff(first, again); d != "" {
			t.Errorf("UpsertAccount (repeat) mismatch with the first (-want +got):\n%s", d)
		}
		if stored, err := s.GetAccount(ctx, agent); err != nil || !stored.UpdatedAt.Equal(first.UpdatedAt) {
			t.Errorf("GetAccount = %+v, %v; want UpdatedAt %v", stored, err, first.UpdatedAt)
		}
	}},
	{"AccountNotFound", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		_, err := s.GetAccount(t.Context(), newAgent())
		wantCode(t, "GetAccount(unknown)", err, store.CodeNotFound)
	}},
	{"AccountCreatedWithEntitlement", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		agent, _ := agentWithCredits(t, s, 100, clock.Now())
		a, err := s.GetAccount(t.Context(), agent)
		if err != nil {
			t.Fatalf("GetAccount after CreateEntitlement: %v", err)
		}
		if a.AgentID != agent || !a.CreatedAt.Equal(clock.Now()) {
			t.Errorf("GetAccount = %+v, want agent %s created at %v", a, agent, clock.Now())
		}
	}},
}
