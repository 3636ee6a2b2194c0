package charge_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store/internal/charge"
)

func TestPool_Order(t *testing.T) {
	at := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	ent := func(id, owner string, typ entitlement.Type, service string) entitlement.Entitlement {
		return entitlement.Entitlement{ID: id, AgentID: owner, Type: typ, Status: entitlement.StatusActive, Scope: entitlement.Scope{Service: service}, CreatedAt: at}
	}
	member := func(wallet string, order entitlement.Order, created time.Time) entitlement.Membership {
		return entitlement.Membership{WalletID: wallet, MemberID: "a", Order: order, CreatedAt: created}
	}
	p := charge.Pool{
		Entitlements: []entitlement.Entitlement{
			ent("own-credits", "a", entitlement.TypeCredits, "s"),
			ent("own-quota", "a", entitlement.TypeQuota, "s"),
			ent("w1-credits", "w1", entitlement.TypeCredits, "s"),
			ent("w2-credits", "w2", entitlement.TypeCredits, "s"),
			ent("w2-quota", "w2", entitlement.TypeQuota, "s"),
			ent("w3-credits", "w3", entitlement.TypeCredits, "s"),
			ent("w3-other", "w3", entitlement.TypeCredits, "other"),
		},
		Members: []entitlement.Membership{
			member("w3", entitlement.OrderWalletFirst, at.Add(2*time.Hour)),
			member("w1", entitlement.OrderOwnFirst, at.Add(time.Hour)),
			member("w2", entitlement.OrderWalletFirst, at),
		},
	}
	got, denials := p.Order("a", "s", "t")
	want := []string{"w2-quota", "w2-credits", "w3-credits", "own-quota", "own-credits", "w1-credits"}
	if len(got) != len(want) {
		t.Fatalf("Order = %d candidates, want %d", len(got), len(want))
	}
	for i, e := range got {
		if e.ID != want[i] {
			t.Errorf("Order[%d] = %s, want %s", i, e.ID, want[i])
		}
	}
	if len(denials) != 1 || denials[0].EntitlementID != "w3-other" || denials[0].Reason != entitlement.ReasonScopeMismatch {
		t.Errorf("Order denials = %+v, want w3-other out of scope", denials)
	}

	alone := charge.Pool{Entitlements: p.Entitlements[:2]}
	if got, _ := alone.Order("a", "s", "t"); len(got) != 2 || got[0].ID != "own-quota" {
		t.Errorf("Order without wallets = %v, want the quota then the credits", got)
	}
}
