package client_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/client"
)

// TestClient_PortalSessions: mint (a retry with the same key answers the
// same session), read, and revoke through the client; the session's token
// works as a client's key on its agent's wallet routes until revoked.
func TestClient_PortalSessions(t *testing.T) {
	c, ctx := startStipend(t)
	ps, err := c.billing.CreatePortalSession(ctx, "portal-1", client.PortalSessionRequest{AgentID: "agent-1", TTLSeconds: 600})
	if err != nil {
		t.Fatalf("CreatePortalSession: %v", err)
	}
	if !strings.HasPrefix(ps.Token, "stp_portal_") || !strings.HasSuffix(ps.URL, "/portal?session="+ps.Token) ||
		!ps.ExpiresAt.Equal(c.clock.Now().Add(10*time.Minute)) {
		t.Errorf("CreatePortalSession = %+v: want a token, its URL and an expiry 10 minutes on", ps)
	}
	again, err := c.billing.CreatePortalSession(ctx, "portal-1", client.PortalSessionRequest{AgentID: "agent-1", TTLSeconds: 600})
	if err != nil || again.ID != ps.ID || again.Token != ps.Token {
		t.Errorf("retry with the same key = %+v, %v; want session %s again", again, err, ps.ID)
	}
	if _, err := c.billing.CreatePortalSession(ctx, "portal-2", client.PortalSessionRequest{AgentID: ""}); !client.IsInvalid(err) {
		t.Errorf("CreatePortalSession without an agent: %v, want invalid", err)
	}
	wallet, err := client.New(c.url, ps.Token)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := wallet.Balance(ctx, "agent-1"); err != nil {
		t.Errorf("the session reading its agent's balance: %v", err)
	}
	if _, err := wallet.Balance(ctx, "agent-2"); !client.IsUnauthorized(err) {
		t.Errorf("the session reading another agent's balance: %v, want unauthorized", err)
	}
	got, err := c.admin.GetPortalSession(ctx, ps.ID)
	if err != nil || got.AgentID != "agent-1" || got.Token != "" {
		t.Errorf("GetPortalSession = %+v, %v; want agent-1's session without its token", got, err)
	}
	revoked, err := c.billing.RevokePortalSession(ctx, ps.ID)
	if err != nil || revoked.RevokedAt == nil {
		t.Fatalf("RevokePortalSession = %+v, %v; want it revoked", revoked, err)
	}
	if _, err := wallet.Balance(ctx, "agent-1"); !client.IsUnauthorized(err) {
		t.Errorf("a revoked session reading its agent's balance: %v, want unauthorized", err)
	}
	if _, err := c.billing.GetPortalSession(ctx, "00000000-0000-0000-0000-000000000000"); !client.IsNotFound(err) {
		t.Errorf("GetPortalSession(unknown): %v, want not found", err)
	}
}
