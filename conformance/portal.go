package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/portal"
	"github.com/stipend-mcp/stipend/store"
)

// portalSessionTests are the contract of store.PortalSessions: a session
// reads back as created (its token's hash, never the token), IDs are
// unique, invalid sessions are refused, and revocation is idempotent and
// keeps the first instant.
var portalSessionTests = []subtest{
	{"PortalSessionCreateGet", testPortalSessionCreateGet},
	{"PortalSessionInvalid", testPortalSessionInvalid},
	{"PortalSessionRevoke", testPortalSessionRevoke},
}

// newPortalSession makes a session of a new agent lasting an hour from now.
func newPortalSession(t *testing.T, now time.Time) (portal.Session, string) {
	t.Helper()
	ps, raw, err := portal.New(newAgent(), "billing-1", now, time.Hour)
	if err != nil {
		t.Fatalf("portal.New: %v", err)
	}
	return ps, raw
}

func createPortalSession(t *testing.T, s store.EntitlementStore, ps portal.Session) portal.Session {
	t.Helper()
	return must(s.CreatePortalSession(t.Context(), ps))(t, "CreatePortalSession")
}

func testPortalSessionCreateGet(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ps, raw := newPortalSession(t, clock.Now())
	created := createPortalSession(t, s, ps)
	if diff := cmp.Diff(ps, created); diff != "" {
		t.Errorf("CreatePortalSession answered (-want +got):\n%s", diff)
	}
	got := must(s.GetPortalSession(t.Context(), ps.ID))(t, "GetPortalSession")
	if diff := cmp.Diff(ps, got); diff != "" {
		t.Errorf("GetPortalSession (-want +got):\n%s", diff)
	}
	if !got.Matches(raw) || got.Matches(raw+"x") {
		t.Errorf("the stored session does not match its token alone")
	}
	wantCode(t, "CreatePortalSession(the same ID again)", func() error {
		_, err := s.CreatePortalSession(t.Context(), ps)
		return err
	}(), store.CodeConflict)
	_, err := s.GetPortalSession(t.Context(), "00000000-0000-0000-0000-000000000000")
	wantCode(t, "GetPortalSession(unknown)", err, store.CodeNotFound)
}

func testPortalSessionInvalid(t *testing.T, s store.EntitlementStore, clock *Clock) {
	for name, change := range map[string]func(*portal.Session){
		"NoAgent":        func(ps *portal.Session) { ps.AgentID = "" },
		"NoHash":         func(ps *portal.Session) { ps.TokenSHA256 = "" },
		"ExpiresAtFirst": func(ps *portal.Session) { ps.ExpiresAt = ps.CreatedAt },
	} {
		ps, _ := newPortalSession(t, clock.Now())
		change(&ps)
		_, err := s.CreatePortalSession(t.Context(), ps)
		wantCode(t, "CreatePortalSession("+name+")", err, store.CodeInvalid)
		_, err = s.GetPortalSession(t.Context(), ps.ID)
		wantCode(t, "GetPortalSession after CreatePortalSession("+name+")", err, store.CodeNotFound)
	}
}

func testPortalSessionRevoke(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ps, _ := newPortalSession(t, clock.Now())
	createPortalSession(t, s, ps)
	first := clock.Advance(time.Minute)
	got, err := s.RevokePortalSession(t.Context(), ps.ID, first)
	if err != nil {
		t.Fatalf("RevokePortalSession: %v", err)
	}
	if got.RevokedAt == nil || !got.RevokedAt.Equal(first) {
		t.Errorf("RevokePortalSession: RevokedAt = %v, want %v", got.RevokedAt, first)
	}
	if got.Usable(first) {
		t.Errorf("a revoked session is usable")
	}
	again, err := s.RevokePortalSession(t.Context(), ps.ID, clock.Advance(time.Minute))
	if err != nil {
		t.Fatalf("RevokePortalSession again: %v", err)
	}
	if again.RevokedAt == nil || !again.RevokedAt.Equal(first) {
		t.Errorf("RevokePortalSession again: RevokedAt = %v, want the first %v", again.RevokedAt, first)
	}
	read, err := s.GetPortalSession(t.Context(), ps.ID)
	if err != nil {
		t.Fatalf("GetPortalSession: %v", err)
	}
	if read.RevokedAt == nil || !read.RevokedAt.Equal(first) || read.RevokedAt.Location() != time.UTC {
		t.Errorf("GetPortalSession after revoking: RevokedAt = %v, want %v in UTC", read.RevokedAt, first)
	}
	_, err = s.RevokePortalSession(t.Context(), "00000000-0000-0000-0000-000000000000", first)
	wantCode(t, "RevokePortalSession(unknown)", err, store.CodeNotFound)
}

// portalSessionFence is CreatePortalSession among the fenced changes:
// POST /v1/portal-sessions is a ledger route.
var portalSessionFence = fencedChange{"CreatePortalSession", func(t *testing.T, f Fenced, clock *Clock) (func(context.Context) error, func(*testing.T) bool) {
	ps, _ := newPortalSession(t, clock.Now())
	return func(ctx context.Context) error { return errOf(f.Store.CreatePortalSession(ctx, ps)) },
		func(t *testing.T) bool { return errOf(f.Store.GetPortalSession(context.Background(), ps.ID)) == nil }
}}
