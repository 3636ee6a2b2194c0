package client_test

import (
	"errors"
	"testing"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/payment"
)

// TestClient_Stripe: the Stripe routes through the client, against the
// real service making its objects at stripe-mock.
func TestClient_Stripe(t *testing.T) {
	base := stripemock.URL(t)
	sc := stripemock.Client(t, base)
	c, ctx := startStipend(t, func(cfg *api.Config) { cfg.Stripe = sc })
	grant := svcCredits

	co, created, err := c.billing.CreateCheckoutSession(ctx, "co-1", client.CheckoutRequest{
		AgentID: "agent-1", Amount: *client.USD(1500), Grant: grant, SuccessURL: "https://app.example/ok",
	})
	if err != nil || !created || co.URL == "" || co.SessionID == "" || co.Payment.Status != payment.StatusPending {
		t.Fatalf("CreateCheckoutSession = %+v, %v, %v; want a new session and a pending payment", co, created, err)
	}
	again, created, err := c.billing.CreateCheckoutSession(ctx, "co-1", client.CheckoutRequest{
		AgentID: "agent-1", Amount: *client.USD(1500), Grant: grant, SuccessURL: "https://app.example/ok",
	})
	if err != nil || created || again.Payment.ID != co.Payment.ID {
		t.Errorf("CreateCheckoutSession again = %+v, %v, %v; want the same payment, created false", again, created, err)
	}

	ip, created, err := c.billing.CreateStripePayment(ctx, "pi-1", client.PaymentRequest{AgentID: "agent-1", Amount: *client.USD(1500), Grant: grant})
	if err != nil || !created || ip.ClientSecret == "" || ip.ProviderIntentID == "" {
		t.Fatalf("CreateStripePayment = %+v, %v, %v; want a payment with its intent and client secret", ip, created, err)
	}
	found, ok, err := c.billing.FindPaymentByProviderIntent(ctx, ip.ProviderIntentID)
	if err != nil || !ok || found.ID != ip.ID {
		t.Errorf("FindPaymentByProviderIntent = %+v, %v, %v; want payment %s", found, ok, err, ip.ID)
	}
	if _, ok, err := c.billing.FindPaymentByProviderIntent(ctx, "pi_nobody"); err != nil || ok {
		t.Errorf("FindPaymentByProviderIntent(unknown) = %v, %v; want not found", ok, err)
	}

	bad, _ := startStipend(t, func(cfg *api.Config) { cfg.Stripe = stripemock.Client(t, stripemock.Misrouted(t, base)) })
	_, _, err = bad.billing.CreateStripePayment(ctx, "pi-2", client.PaymentRequest{AgentID: "agent-1", Amount: *client.USD(1500), Grant: grant})
	var p *client.Problem
	if !client.IsProviderError(err) || !errors.As(err, &p) || p.ProviderRequestID != "req_123" {
		t.Errorf("CreateStripePayment against a refusing Stripe: %v; want a provider error naming stripe-mock's request req_123", err)
	}
}
