package client_test

import (
	"context"
	"testing"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/topup"
)

// TestClient_TopUp: the top-up routes through the client.
func TestClient_TopUp(t *testing.T) {
	c, ctx := startStipend(t)
	set := topup.Settings{Threshold: *client.USD(500), Amount: *client.USD(1000), DailyCap: *client.USD(3000), Scope: entitlement.Scope{Service: "svc"}}
	if _, err := c.billing.PutAccount(ctx, "agent-1", client.AccountUpdate{}); err != nil {
		t.Fatalf("PutAccount: %v", err)
	}
	if _, err := c.billing.PutTopUp(ctx, "agent-1", set); !client.IsConflict(err) {
		t.Fatalf("PutTopUp without a saved method: %v, want a conflict", err)
	}
	if _, err := c.store.SaveTopUpMethod(context.Background(), "agent-1", topup.Method{Customer: "cus_1", PaymentMethod: "pm_1"}); err != nil {
		t.Fatalf("SaveTopUpMethod: %v", err)
	}
	got, err := c.billing.PutTopUp(ctx, "agent-1", set)
	if err != nil || !got.Enabled || got.Settings == nil || got.Settings.Amount != set.Amount || got.Settings.Threshold != set.Threshold {
		t.Fatalf("PutTopUp = %+v, %v; want it enabled with the settings", got, err)
	}
	if got, err := c.billing.GetTopUp(ctx, "agent-1"); err != nil || !got.Enabled || got.Method == nil || got.Method.Customer != "cus_1" {
		t.Errorf("GetTopUp = %+v, %v; want enabled with the saved customer", got, err)
	}
	if got, err := c.billing.DisableTopUp(ctx, "agent-1"); err != nil || got.Enabled {
		t.Errorf("DisableTopUp = %+v, %v; want disabled", got, err)
	}
}
