package portal_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/portal"
)

// TestSession_Token: a token names its session, matches it alone, and is
// stored only as its hash.
func TestSession_Token(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 123456789, time.UTC)
	s, raw, err := portal.New("agent-1", "billing-1", now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	if id, ok := portal.IDOf(raw); !ok || id != s.ID {
		t.Errorf("IDOf(token) = %q, %v; want %q", id, ok, s.ID)
	}
	if !portal.IsToken(raw) || !s.Matches(raw) || strings.Contains(s.TokenSHA256, raw[len(portal.TokenPrefix):]) {
		t.Errorf("the session does not match its token, or stores it")
	}
	other, raw2, _ := portal.New("agent-1", "billing-1", now, time.Hour)
	if s.Matches(raw2) || other.Matches(raw) {
		t.Errorf("a session matches another's token")
	}
	if !s.CreatedAt.Equal(now.Truncate(time.Microsecond)) || !s.ExpiresAt.Equal(s.CreatedAt.Add(time.Hour)) {
		t.Errorf("createdAt %v, expiresAt %v", s.CreatedAt, s.ExpiresAt)
	}
	if !s.Usable(s.ExpiresAt.Add(-time.Nanosecond)) || s.Usable(s.ExpiresAt) {
		t.Errorf("Usable: want true until expiresAt, false from it")
	}
	revoked := s.Clone()
	at := now.Add(time.Minute)
	revoked.RevokedAt = &at
	if revoked.Usable(now) || s.RevokedAt != nil {
		t.Errorf("a revoked session is usable, or Clone shares RevokedAt")
	}
	for _, bad := range []string{"", "stp_portal_", "stp_portal_xyz_abc", "stp_billing_" + raw[len(portal.TokenPrefix):], portal.TokenPrefix + strings.Repeat("g", 32) + "_00"} {
		if _, ok := portal.IDOf(bad); ok {
			t.Errorf("IDOf(%q): ok, want not a token", bad)
		}
	}
}
