package client_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// TestClient_WebhookEndpoints manages an endpoint through its whole life
// on the real service: create, list, get, update, disable, enable,
// rotate, delete.
func TestClient_WebhookEndpoints(t *testing.T) {
	c, ctx := startStipend(t)
	req := client.WebhookEndpointRequest{URL: "http://127.0.0.1:9/hook", EventTypes: []event.Type{event.PaymentSucceeded}}
	created, err := c.admin.CreateWebhookEndpoint(ctx, "ep-1", req)
	if err != nil || created.ID == "" || created.URL != req.URL || !strings.HasPrefix(created.Secret, store.SecretPrefix) {
		t.Fatalf("CreateWebhookEndpoint = %+v, %v; want an endpoint with a secret", created, err)
	}
	if again, err := c.admin.CreateWebhookEndpoint(ctx, "ep-1", req); err != nil || again.ID != created.ID || again.Secret != created.Secret {
		t.Errorf("CreateWebhookEndpoint again with its key = %+v, %v; want the same endpoint and secret", again, err)
	}
	other := req
	other.URL = "http://127.0.0.1:9/other"
	if _, err := c.admin.CreateWebhookEndpoint(ctx, "ep-1", other); !client.IsKeyReused(err) {
		t.Errorf("CreateWebhookEndpoint with its key and another URL: %v, want key reused", err)
	}
	if _, err := c.admin.CreateWebhookEndpoint(ctx, "ep-2", client.WebhookEndpointRequest{URL: "ftp://x"}); !client.IsInvalid(err) {
		t.Errorf("CreateWebhookEndpoint(ftp URL): %v, want invalid", err)
	}
	if _, err := c.host.CreateWebhookEndpoint(ctx, "ep-3", req); !client.IsUnauthorized(err) {
		t.Errorf("CreateWebhookEndpoint with a host key: %v, want unauthorized", err)
	}

	list, err := c.admin.ListWebhookEndpoints(ctx, client.Page{})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != created.ID {
		t.Errorf("ListWebhookEndpoints = %+v, %v; want [%s]", list, err, created.ID)
	}
	got, err := c.admin.GetWebhookEndpoint(ctx, created.ID)
	if err != nil || got.ID != created.ID || got.Secret != "" {
		t.Errorf("GetWebhookEndpoint = %+v, %v; want the endpoint, without its secret", got, err)
	}

	url, types := "http://127.0.0.1:9/moved", []event.Type{}
	moved, err := c.admin.UpdateWebhookEndpoint(ctx, created.ID, client.WebhookEndpointUpdate{URL: &url, EventTypes: &types})
	if err != nil || moved.URL != url || len(moved.EventTypes) != 0 {
		t.Errorf("UpdateWebhookEndpoint(url, all types) = %+v, %v", moved, err)
	}
	off, err := c.admin.DisableWebhookEndpoint(ctx, created.ID, "maintenance")
	if err != nil || !off.Disabled || off.DisabledReason != "maintenance" {
		t.Errorf("DisableWebhookEndpoint = %+v, %v; want disabled for maintenance", off, err)
	}
	on, err := c.admin.UpdateWebhookEndpoint(ctx, created.ID, client.WebhookEndpointUpdate{Enable: true})
	if err != nil || on.Disabled || on.URL != url {
		t.Errorf("UpdateWebhookEndpoint(Enable) = %+v, %v; want enabled, URL kept", on, err)
	}

	grace := int64(3600)
	rotated, err := c.admin.RotateWebhookSecret(ctx, created.ID, "rotate-1", client.SecretRotation{GracePeriodSeconds: &grace})
	if err != nil || rotated.Secret == created.Secret || !strings.HasPrefix(rotated.Secret, store.SecretPrefix) ||
		rotated.PreviousSecretExpiresAt == nil || !rotated.PreviousSecretExpiresAt.Equal(c.clock.Now().Add(time.Hour)) {
		t.Errorf("RotateWebhookSecret(1 h grace) = %+v, %v; want a new secret, the old one signing for an hour", rotated, err)
	}
	if again, err := c.admin.RotateWebhookSecret(ctx, created.ID, "rotate-1", client.SecretRotation{GracePeriodSeconds: &grace}); err != nil || again.Secret != rotated.Secret {
		t.Errorf("RotateWebhookSecret again with its key = %+v, %v; want the same secret, not another rotation", again, err)
	}
	if _, err := c.admin.RotateWebhookSecret(ctx, created.ID, "", client.SecretRotation{}); !client.IsInvalid(err) {
		t.Errorf("RotateWebhookSecret without a key: %v, want invalid", err)
	}

	if err := c.admin.DeleteWebhookEndpoint(ctx, created.ID); err != nil {
		t.Fatalf("DeleteWebhookEndpoint: %v", err)
	}
	if _, err := c.admin.GetWebhookEndpoint(ctx, created.ID); !client.IsNotFound(err) {
		t.Errorf("GetWebhookEndpoint after delete: %v, want not found", err)
	}
	if err := c.admin.DeleteWebhookEndpoint(ctx, created.ID); !client.IsNotFound(err) {
		t.Errorf("DeleteWebhookEndpoint again: %v, want not found", err)
	}
}

// TestClient_Deliveries lists, reads and retries deliveries on the real
// service; the test puts them in its store as the dispatcher would.
func TestClient_Deliveries(t *testing.T) {
	c, ctx := startStipend(t)
	for _, id := range []string{"d1", "d2"} {
		if _, _, err := c.store.EnqueueDelivery(ctx, store.Delivery{ID: id, Key: "k-" + id, EndpointID: "ep", EventID: "ev-" + id,
			EventType: event.PaymentSucceeded, Payload: []byte(`{}`)}); err != nil {
			t.Fatalf("EnqueueDelivery: %v", err)
		}
	}
	claimed, err := c.store.ClaimDueDeliveries(ctx, c.clock.Now(), 1, time.Minute, "test")
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimDueDeliveries = %d, %v", len(claimed), err)
	}
	dead := claimed[0].ID
	if _, err := c.store.FinishDelivery(ctx, dead, claimed[0].ClaimToken, store.AttemptResult{Status: store.DeliveryDead, StatusCode: 500}); err != nil {
		t.Fatalf("FinishDelivery: %v", err)
	}

	list, err := c.admin.ListDeliveries(ctx, store.DeliveryFilter{Status: store.DeliveryDead, EventType: event.PaymentSucceeded}, client.Page{})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != dead || list.Items[0].LastStatusCode != 500 {
		t.Errorf("ListDeliveries(dead) = %+v, %v; want [%s]", list, err, dead)
	}
	if _, err := c.admin.ListDeliveries(ctx, store.DeliveryFilter{Status: "lost"}, client.Page{}); !client.IsInvalid(err) {
		t.Errorf("ListDeliveries(status lost): %v, want invalid", err)
	}
	if got, err := c.admin.GetDelivery(ctx, dead); err != nil || got.Status != store.DeliveryDead {
		t.Errorf("GetDelivery = %+v, %v; want dead", got, err)
	}
	retried, err := c.admin.RetryDelivery(ctx, dead, "retry-1")
	if err != nil || retried.Status != store.DeliveryPending || retried.ID != dead {
		t.Errorf("RetryDelivery = %+v, %v; want pending", retried, err)
	}
	_, err = c.admin.RetryDelivery(ctx, dead, "retry-2")
	var p *client.Problem
	if !client.IsConflict(err) || client.IsKeyReused(err) || !errors.As(err, &p) || p.Type != problem.Conflict.URI() {
		t.Errorf("RetryDelivery of a pending delivery: %v, want a 409 conflict", err)
	}
	if _, err := c.admin.RetryDelivery(ctx, "no-such-delivery", "retry-3"); !client.IsNotFound(err) {
		t.Errorf("RetryDelivery of a missing delivery: %v, want not found", err)
	}
}

// TestClient_JWKS: the JWKS the client fetches verifies the service's
// receipts.
func TestClient_JWKS(t *testing.T) {
	c, ctx := startStipend(t)
	grant := svcCredits
	p, _, err := c.billing.CreatePayment(ctx, "pay-1", client.PaymentRequest{AgentID: "agent-1", Amount: *client.USD(300),
		Provider: payment.ProviderManual, Grant: grant})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	done, err := c.billing.SucceedPayment(ctx, p.ID)
	if err != nil {
		t.Fatalf("SucceedPayment: %v", err)
	}
	set, err := c.host.JWKS(ctx)
	if err != nil || len(set.Keys) != 1 {
		t.Fatalf("JWKS = %+v, %v; want one key", set, err)
	}
	r, err := receipt.Verify(done.Receipt.JWS, set)
	if err != nil || r.ID != done.Receipt.ID || r.PaymentID != p.ID {
		t.Errorf("receipt.Verify(the payment's receipt, JWKS()) = %+v, %v; want receipt %s", r, err, done.Receipt.ID)
	}
}
