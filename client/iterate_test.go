package client_test

import (
	"fmt"
	"iter"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// collect ranges over seq, failing the test on an error, and returns the
// IDs it yielded.
func collect[T any](t *testing.T, name string, seq iter.Seq2[T, error], id func(T) string) []string {
	t.Helper()
	var ids []string
	for item, err := range seq {
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		ids = append(ids, id(item))
	}
	return ids
}

// TestClient_All ranges over every list of the real service; the
// consumptions take three pages.
func TestClient_All(t *testing.T) {
	c, ctx := startStipend(t)
	const agent, consumes = "agent-1", 2*store.MaxPageSize + 30

	grant := svcCredits
	var grants []string
	for i := range 3 {
		e, err := c.admin.GrantEntitlement(ctx, agent, fmt.Sprint("grant-", i), client.EntitlementGrant{Grant: grant, Balance: client.USD(1000)})
		if err != nil {
			t.Fatalf("GrantEntitlement: %v", err)
		}
		grants = append(grants, e.ID)
	}
	if got := collect(t, "AllEntitlements", c.billing.AllEntitlements(ctx, agent, client.EntitlementFilter{}), func(e entitlement.Entitlement) string { return e.ID }); len(got) != 3 {
		t.Errorf("AllEntitlements = %v, want the 3 grants %v", got, grants)
	}

	for i := range consumes {
		if _, err := c.host.Consume(ctx, client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t",
			IdempotencyKey: fmt.Sprint("k", i), Cost: client.USD(1)}); err != nil {
			t.Fatalf("Consume %d: %v", i, err)
		}
	}
	before := c.requests.Load()
	got := collect(t, "AllConsumptions", c.billing.AllConsumptions(ctx, agent, time.Time{}), func(x entitlement.Consumption) string { return x.ID })
	seen := map[string]bool{}
	for _, id := range got {
		seen[id] = true
	}
	if len(got) != consumes || len(seen) != consumes {
		t.Errorf("AllConsumptions = %d items (%d distinct), want %d", len(got), len(seen), consumes)
	}
	if n := c.requests.Load() - before; n != 3 {
		t.Errorf("AllConsumptions fetched %d pages, want 3", n)
	}

	t.Run("BreakStopsFetching", func(t *testing.T) {
		before := c.requests.Load()
		for range c.billing.AllConsumptions(ctx, agent, time.Time{}) {
			break
		}
		if n := c.requests.Load() - before; n != 1 {
			t.Errorf("breaking out after the first item fetched %d pages, want 1", n)
		}
	})
	t.Run("ErrorEndsTheLoop", func(t *testing.T) {
		var errs, items int
		for _, err := range c.host.AllConsumptions(ctx, agent, time.Time{}) {
			if err != nil {
				errs++
				if !client.IsUnauthorized(err) {
					t.Errorf("AllConsumptions with a host key: error %v, want unauthorized", err)
				}
				continue
			}
			items++
		}
		if errs != 1 || items != 0 {
			t.Errorf("AllConsumptions with a host key yielded %d items and %d errors, want 0 and 1", items, errs)
		}
	})

	for i := range 2 {
		p, _, err := c.billing.CreatePayment(ctx, fmt.Sprint("pay-", i), client.PaymentRequest{AgentID: agent, Amount: *client.USD(300),
			Provider: payment.ProviderManual, Grant: grant})
		if err != nil {
			t.Fatalf("CreatePayment: %v", err)
		}
		if _, err := c.billing.SucceedPayment(ctx, p.ID); err != nil {
			t.Fatalf("SucceedPayment: %v", err)
		}
	}
	if got := collect(t, "AllReceipts", c.billing.AllReceipts(ctx, agent), func(r receipt.Signed) string { return r.ID }); len(got) != 2 {
		t.Errorf("AllReceipts = %v, want 2 receipts", got)
	}

	for i := range 2 {
		if _, err := c.admin.CreateWebhookEndpoint(ctx, fmt.Sprint("ep-", i), client.WebhookEndpointRequest{URL: fmt.Sprintf("http://127.0.0.1:9/%d", i)}); err != nil {
			t.Fatalf("CreateWebhookEndpoint: %v", err)
		}
	}
	if got := collect(t, "AllWebhookEndpoints", c.admin.AllWebhookEndpoints(ctx), func(e store.Endpoint) string { return e.ID }); len(got) != 2 {
		t.Errorf("AllWebhookEndpoints = %v, want 2 endpoints", got)
	}
	for i := range 3 {
		if _, _, err := c.store.EnqueueDelivery(ctx, store.Delivery{ID: fmt.Sprint("d", i), Key: fmt.Sprint("k", i), EndpointID: "ep",
			EventID: fmt.Sprint("ev", i), EventType: event.PaymentSucceeded, Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("EnqueueDelivery: %v", err)
		}
	}
	if got := collect(t, "AllDeliveries", c.admin.AllDeliveries(ctx, store.DeliveryFilter{Status: store.DeliveryPending}), func(d store.Delivery) string { return d.ID }); len(got) != 3 {
		t.Errorf("AllDeliveries(pending) = %v, want 3 deliveries", got)
	}
}
