package client_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
)

// TestClient_Holds checks the hold and refund calls against the real REST
// service: authorize, capture, release, expiry, and a consumption refund.
func TestClient_Holds(t *testing.T) {
	c, ctx := startStipend(t)
	const agent = "agent-1"
	usd := client.USD
	grant := svcCredits
	e, err := c.admin.GrantEntitlement(ctx, agent, "grant-1", client.EntitlementGrant{Grant: grant, Balance: usd(100)})
	if err != nil {
		t.Fatalf("GrantEntitlement: %v", err)
	}
	auth := func(key string, cents int64) client.AuthorizeRequest {
		return client.AuthorizeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: key, MaxCost: usd(cents)}
	}

	held, err := c.host.Authorize(ctx, auth("k1", 40))
	if err != nil || held.Result != client.ResultHeld || held.Hold.Status != entitlement.HoldOpen || held.Hold.EntitlementID != e.ID ||
		held.Hold.MaxCost != *usd(40) {
		t.Fatalf("Authorize = %+v, %v; want 40 USD held on %s", held, err, e.ID)
	}
	if again, err := c.host.Authorize(ctx, auth("k1", 40)); err != nil || again.Result != client.ResultReplay || again.Hold.ID != held.Hold.ID {
		t.Errorf("Authorize again = %+v, %v; want a replay of %s", again, err, held.Hold.ID)
	}
	if got, err := c.billing.GetEntitlement(ctx, e.ID); err != nil || got.Credits.Held != *usd(40) || got.Credits.Balance != *usd(100) {
		t.Errorf("GetEntitlement = %+v, %v; want 40 of 100 USD held", got, err)
	}
	for _, cl := range []*client.Client{c.host, c.billing} {
		if got, err := cl.GetHold(ctx, held.Hold.ID); err != nil || !cmp.Equal(*got, held.Hold) {
			t.Errorf("GetHold = %+v, %v; want %+v", got, err, held.Hold)
		}
	}

	captured, err := c.host.CaptureHold(ctx, held.Hold.ID, client.CaptureRequest{AgentID: agent, Cost: usd(25)})
	if err != nil || captured.Result != client.ResultCaptured || captured.Consumption.Cost != *usd(25) ||
		captured.Consumption.HoldID != held.Hold.ID || captured.Hold.Status != entitlement.HoldCaptured {
		t.Fatalf("CaptureHold = %+v, %v; want 25 USD captured", captured, err)
	}
	if again, err := c.host.CaptureHold(ctx, held.Hold.ID, client.CaptureRequest{AgentID: agent, Cost: usd(25)}); err != nil ||
		again.Result != client.ResultReplay || again.Consumption.ID != captured.Consumption.ID {
		t.Errorf("CaptureHold again = %+v, %v; want a replay of %s", again, err, captured.Consumption.ID)
	}
	t.Run("HoldConflict", func(t *testing.T) {
		_, err := c.host.CaptureHold(ctx, held.Hold.ID, client.CaptureRequest{AgentID: agent, Cost: usd(26)})
		if !client.IsHoldConflict(err) || client.IsHoldExpired(err) || !client.IsConflict(err) {
			t.Errorf("CaptureHold with another amount: %v, want hold-conflict", err)
		}
		if _, err := c.host.ReleaseHold(ctx, held.Hold.ID, agent); !client.IsHoldConflict(err) {
			t.Errorf("ReleaseHold of a captured hold: %v, want hold-conflict", err)
		}
	})
	t.Run("Release", func(t *testing.T) {
		h, err := c.host.Authorize(ctx, auth("k2", 10))
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		if got, err := c.host.ReleaseHold(ctx, h.Hold.ID, agent); err != nil || got.Result != client.ResultReleased ||
			got.Hold.Status != entitlement.HoldReleased {
			t.Errorf("ReleaseHold = %+v, %v; want released", got, err)
		}
		if got, err := c.host.ReleaseHold(ctx, h.Hold.ID, agent); err != nil || got.Result != client.ResultReplay {
			t.Errorf("ReleaseHold again = %+v, %v; want a replay", got, err)
		}
	})
	t.Run("Expired", func(t *testing.T) {
		r := auth("k3", 10)
		r.TTLSeconds = 60
		h, err := c.host.Authorize(ctx, r)
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		c.clock.Advance(time.Minute)
		_, err = c.host.CaptureHold(ctx, h.Hold.ID, client.CaptureRequest{AgentID: agent})
		if !client.IsHoldExpired(err) || client.IsHoldConflict(err) {
			t.Errorf("CaptureHold past the expiry: %v, want hold-expired", err)
		}
		if got, err := c.billing.GetHold(ctx, h.Hold.ID); err != nil || got.Status != entitlement.HoldExpired {
			t.Errorf("GetHold = %+v, %v; want expired", got, err)
		}
	})
	t.Run("Refusals", func(t *testing.T) {
		if _, err := c.host.CaptureHold(ctx, "no-such-hold", client.CaptureRequest{AgentID: agent}); !client.IsNotFound(err) {
			t.Errorf("CaptureHold of an unknown hold: %v, want not found", err)
		}
		var p *client.Problem
		_, err := c.host.Authorize(ctx, auth("k4", 1000))
		if !client.IsPaymentRequired(err) || !errors.As(err, &p) || len(p.Reasons) != 1 || p.Reasons[0].Reason != entitlement.ReasonInsufficientBalance {
			t.Errorf("Authorize beyond what is available: %v, want payment required (insufficient_balance)", err)
		}
		h, err := c.host.Authorize(ctx, auth("k5", 5))
		if err != nil {
			t.Fatalf("Authorize: %v", err)
		}
		_, err = c.host.CaptureHold(ctx, h.Hold.ID, client.CaptureRequest{AgentID: agent, Cost: usd(6)})
		if !client.IsInvalid(err) || !errors.As(err, &p) || len(p.Errors) == 0 || p.Errors[0].Field != "cost.cents" {
			t.Errorf("CaptureHold beyond the hold: %v, want a 400 naming cost.cents", err)
		}
	})

	t.Run("RefundConsumption", func(t *testing.T) {
		id := captured.Consumption.ID
		got, err := c.billing.RefundConsumption(ctx, id, "refund-1", client.RefundRequest{Cost: usd(5)})
		if err != nil || got.Consumption.Refund == nil || got.Consumption.Refund.Cost != *usd(5) || got.Entitlement.ID != e.ID {
			t.Fatalf("RefundConsumption = %+v, %v; want 5 USD back to %s", got, err, e.ID)
		}
		again, err := c.billing.RefundConsumption(ctx, id, "refund-1", client.RefundRequest{Cost: usd(5)})
		if err != nil || !cmp.Equal(again, got) {
			t.Errorf("RefundConsumption with the same key = %+v, %v; want the first answer", again, err)
		}
		if _, err := c.billing.RefundConsumption(ctx, id, "refund-2", client.RefundRequest{Cost: usd(6)}); !client.IsRefundRefused(err) {
			t.Errorf("RefundConsumption with another amount: %v, want refund-refused", err)
		}
		if _, err := c.host.RefundConsumption(ctx, id, "refund-3", client.RefundRequest{}); !client.IsUnauthorized(err) {
			t.Errorf("RefundConsumption with a host key: %v, want unauthorized", err)
		}
		if _, err := c.admin.RefundConsumption(ctx, "no-such-consumption", "refund-4", client.RefundRequest{}); !client.IsNotFound(err) {
			t.Errorf("RefundConsumption of an unknown consumption: %v, want not found", err)
		}
	})
}

// TestClient_HoldRetries: authorize, capture, release and refund are
// retried after a 503 with the same request (body and Idempotency-Key).
func TestClient_HoldRetries(t *testing.T) {
	unavailable := problemAnswer(503, `{"type":"about:blank","title":"Service Unavailable","status":503}`)
	const hold = `{"id":"h1","agentId":"a1","entitlementId":"e1","entitlementType":"credits","service":"s","tool":"t","idempotencyKey":"k1","status":"held","maxUnits":1,"createdAt":"2026-11-30T10:00:00Z","expiresAt":"2026-11-30T10:05:00Z"}`
	const consumption = `{"id":"c1","agentId":"a1","entitlementId":"e1","entitlementType":"credits","service":"s","tool":"t","idempotencyKey":"k1","units":1,"occurredAt":"2026-11-30T10:00:00Z"}`
	units := int64(0)
	tests := []struct {
		name, path, answer string
		call               func(*client.Client) error
	}{
		{"Authorize", "/v1/authorize", `{"result":"held","hold":` + hold + `}`, func(c *client.Client) error {
			_, err := c.Authorize(t.Context(), client.AuthorizeRequest{AgentID: "a1", Service: "s", Tool: "t", IdempotencyKey: "k1"})
			return err
		}},
		{"CaptureHold", "/v1/holds/h 1/capture", `{"result":"captured","hold":` + hold + `,"consumption":` + consumption + `}`, func(c *client.Client) error {
			_, err := c.CaptureHold(t.Context(), "h 1", client.CaptureRequest{AgentID: "a1", Units: &units})
			return err
		}},
		{"ReleaseHold", "/v1/holds/h1/release", `{"result":"released","hold":` + hold + `}`, func(c *client.Client) error {
			_, err := c.ReleaseHold(t.Context(), "h1", "a1")
			return err
		}},
		{"RefundConsumption", "/v1/consumptions/c1/refund", `{"consumption":` + consumption + `,"entitlement":{"id":"e1"}}`, func(c *client.Client) error {
			_, err := c.RefundConsumption(t.Context(), "c1", "r-1", client.RefundRequest{})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := &recorder{answers: []func(http.ResponseWriter){unavailable, jsonAnswer(200, tt.answer)}}
			if err := tt.call(newClient(t, rc)); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			reqs := rc.got()
			if len(reqs) != 2 {
				t.Fatalf("got %d attempts, want 2", len(reqs))
			}
			if reqs[0].Path != tt.path {
				t.Errorf("path %q, want %q", reqs[0].Path, tt.path)
			}
			if reqs[0] != reqs[1] {
				t.Errorf("retry sent %+v, want the first attempt's %+v", reqs[1], reqs[0])
			}
		})
	}
}
