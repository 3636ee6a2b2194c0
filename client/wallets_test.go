package client_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/usage"
)

// TestClient_Wallets: a wallet made, funded and shared by two members with
// daily caps, through the client: the cap's refusal names the member, the
// members and the member's wallets are listed, caps change and go, a
// member is removed.
func TestClient_Wallets(t *testing.T) {
	c, ctx := startStipend(t)
	const team, alice, bob = "team", "alice", "bob"
	a, err := c.billing.PutAccount(ctx, team, client.AccountUpdate{Kind: entitlement.KindWallet, DisplayName: "Team"})
	if err != nil || a.Kind != entitlement.KindWallet {
		t.Fatalf("PutAccount(wallet) = %+v, %v", a, err)
	}
	if _, err := c.billing.PutAccount(ctx, team, client.AccountUpdate{Kind: entitlement.KindAgent}); !client.IsConflict(err) {
		t.Errorf("PutAccount(kind agent) on a wallet = %v, want a conflict", err)
	}
	ent, err := c.admin.GrantEntitlement(ctx, team, "fund", client.EntitlementGrant{Grant: svcCredits, Balance: client.USD(500)})
	if err != nil {
		t.Fatalf("GrantEntitlement: %v", err)
	}
	daily := func(cents int64) *client.Caps {
		return &client.Caps{SpendLimit: &client.SpendLimit{Period: entitlement.PeriodDay, Max: client.USD(cents)}}
	}
	if _, err := c.admin.AddMember(ctx, team, "", client.MemberRequest{MemberID: alice}); err == nil {
		t.Errorf("AddMember without an idempotency key: no error")
	}
	before := c.requests.Load()
	if _, err := c.admin.AddMember(ctx, team, "add-nobody", client.MemberRequest{}); !client.IsInvalid(err) || c.requests.Load() != before {
		t.Errorf("AddMember(no memberId) = %v after %d requests, want it refused unsent", err, c.requests.Load()-before)
	}
	m, err := c.admin.AddMember(ctx, team, "add-alice", client.MemberRequest{MemberID: alice, Caps: daily(20)})
	if err != nil || m.MemberID != alice || m.Order != entitlement.OrderOwnFirst {
		t.Fatalf("AddMember(alice) = %+v, %v", m, err)
	}
	if _, err := c.admin.AddMember(ctx, team, "add-bob", client.MemberRequest{MemberID: bob, Order: entitlement.OrderWalletFirst, Caps: daily(100)}); err != nil {
		t.Fatalf("AddMember(bob): %v", err)
	}
	if _, err := c.admin.AddMember(ctx, team, "add-alice-2", client.MemberRequest{MemberID: alice}); !client.IsConflict(err) {
		t.Errorf("AddMember(alice again) = %v, want a conflict", err)
	}
	var p *client.Problem
	if _, err := c.admin.AddMember(ctx, team, "add-bad", client.MemberRequest{MemberID: "carol", Caps: &client.Caps{MaxUnitsPerCall: new(int64)}}); !errors.As(err, &p) || len(p.Errors) != 1 || p.Errors[0].Field != "caps.maxUnitsPerCall" {
		t.Errorf("AddMember(maxUnitsPerCall 0) = %v, want a problem naming caps.maxUnitsPerCall", err)
	}

	consume := func(agent, key string, cents int64) (*client.ConsumeResult, error) {
		return c.host.Consume(ctx, client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: key, Cost: client.USD(cents)})
	}
	r, err := consume(alice, "a1", 15)
	if err != nil || r.Consumption.WalletID != team || r.Consumption.EntitlementID != ent.ID {
		t.Fatalf("Consume(alice) = %+v, %v; want a charge to %s", r, err, team)
	}
	_, err = consume(alice, "a2", 6)
	want := entitlement.Denial{EntitlementID: ent.ID, Reason: entitlement.ReasonMemberLimit, MemberID: alice, Limit: entitlement.LimitSpend}
	if !client.IsPaymentRequired(err) || !errors.As(err, &p) || !slices.Contains(p.Reasons, want) {
		t.Errorf("Consume over alice's cap = %v, want a 402 with %+v", err, want)
	}
	if _, err := consume(bob, "b1", 60); err != nil {
		t.Errorf("Consume(bob): %v", err)
	}

	var members []string
	for m, err := range c.billing.AllMembers(ctx, team) {
		if err != nil {
			t.Fatalf("AllMembers: %v", err)
		}
		members = append(members, m.MemberID)
	}
	if !slices.Equal(members, []string{alice, bob}) {
		t.Errorf("AllMembers = %v, want alice, bob", members)
	}
	ws, err := c.billing.ListWallets(ctx, alice, client.Page{})
	if err != nil || len(ws.Items) != 1 {
		t.Fatalf("ListWallets(alice) = %+v, %v", ws, err)
	}
	if w := ws.Items[0]; w.WalletID != team || w.Balance.Credits[0].Available != *client.USD(500 - 75) || w.CapRoom == nil || *w.CapRoom.Amount != *client.USD(5) {
		t.Errorf("alice's wallet = %+v, want %s with 425 available and 5 of room", w, team)
	}
	c.clock.Advance(time.Minute) // the range ends now, excluded
	page, err := c.billing.Usage(ctx, team, client.UsageQuery{GroupBy: usage.ByMember}, client.Page{})
	if err != nil || len(page.Items) != 2 {
		t.Fatalf("Usage(by member) = %+v, %v", page, err)
	}

	m, err = c.admin.UpdateMember(ctx, team, alice, client.MemberPatch{Caps: client.Remove[client.Caps]()})
	if err != nil || !m.Caps.IsZero() {
		t.Errorf("UpdateMember(no caps) = %+v, %v", m, err)
	}
	if _, err := consume(alice, "a2", 6); err != nil {
		t.Errorf("Consume(alice) without caps: %v", err)
	}
	got, err := c.admin.GetMember(ctx, team, alice)
	if err != nil || got.MemberID != alice {
		t.Errorf("GetMember = %+v, %v", got, err)
	}
	if _, err := c.admin.RemoveMember(ctx, team, bob); err != nil {
		t.Errorf("RemoveMember(bob): %v", err)
	}
	if _, err := c.admin.RemoveMember(ctx, team, bob); !client.IsNotFound(err) {
		t.Errorf("RemoveMember(bob) again = %v, want not found", err)
	}
	if _, err := consume(bob, "b2", 1); !client.IsPaymentRequired(err) {
		t.Errorf("Consume(bob) after removal = %v, want a 402", err)
	}
}
