package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

func TestClient_Limits(t *testing.T) {
	c, ctx := startStipend(t)
	const agent = "agent-limits"
	usd := client.USD
	grant := client.EntitlementGrant{
		Grant:   svcCredits,
		Balance: usd(1000),
		Limits:  &client.Limits{MaxPerCall: client.To(*usd(50))},
		Alerts:  []client.Threshold{{Percent: new(int64(50))}},
	}
	e, err := c.admin.GrantEntitlement(ctx, agent, "grant-limits", grant)
	if err != nil || e.Limits.MaxPerCall == nil || e.Limits.MaxPerCall.Cents != 50 || len(e.Alerts) != 1 {
		t.Fatalf("GrantEntitlement with limits = %+v, %v", e, err)
	}
	_, err = c.host.Consume(ctx, client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: "k1", Cost: usd(51)})
	var p *client.Problem
	if !client.IsPaymentRequired(err) || !errors.As(err, &p) || p.Reasons[0].Reason != entitlement.ReasonMaxPerCall {
		t.Fatalf("Consume above maxPerCall: %v, want payment required for %s", err, entitlement.ReasonMaxPerCall)
	}

	exp := c.clock.Now().Add(time.Hour)
	got, err := c.admin.UpdateEntitlement(ctx, e.ID, client.EntitlementPatch{
		Limits: client.To(client.Limits{
			MaxPerCall: client.Remove[money.Money](),
			SpendLimit: client.To(client.SpendLimit{Period: entitlement.PeriodDay, Max: usd(100)}),
		}),
		Metadata:  client.To(map[string]string{"team": "blue"}),
		ExpiresAt: client.To(exp),
	})
	if err != nil || got.Limits.MaxPerCall != nil || got.Limits.Spend.Max != *usd(100) || got.Metadata["team"] != "blue" || !got.ExpiresAt.Equal(exp) {
		t.Fatalf("UpdateEntitlement = %+v, %v", got, err)
	}
	_, err = c.admin.UpdateEntitlement(ctx, e.ID, client.EntitlementPatch{
		Alerts: client.To([]client.Threshold{{Amount: &money.Money{Cents: 5, Currency: "EUR"}}}),
	})
	if !errors.As(err, &p) || p.Status != 400 || len(p.Errors) != 1 || p.Errors[0].Field != "alerts[0].amount.currency" {
		t.Errorf("UpdateEntitlement with an alert in EUR: %v, want a 400 naming alerts[0].amount.currency", err)
	}
	if got, err = c.admin.UpdateEntitlement(ctx, e.ID, client.EntitlementPatch{Limits: client.Remove[client.Limits](), Alerts: client.Remove[[]client.Threshold]()}); err != nil || !got.Limits.IsZero() || len(got.Alerts) != 0 {
		t.Errorf("UpdateEntitlement removing limits and alerts = %+v, %v", got, err)
	}

	acct, err := c.admin.SetAccountLimits(ctx, agent, entitlement.AccountLimits{MaxPerCall: []money.Money{*usd(20)}})
	if err != nil || len(acct.Limits.MaxPerCall) != 1 {
		t.Fatalf("SetAccountLimits = %+v, %v", acct, err)
	}
	_, err = c.host.Consume(ctx, client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: "k2", Cost: usd(21)})
	if !errors.As(err, &p) || len(p.Reasons) != 1 || p.Reasons[0] != (entitlement.Denial{Reason: entitlement.ReasonMaxPerCall}) {
		t.Errorf("Consume above the account cap: %v, want one max_per_call_exceeded", err)
	}
}
