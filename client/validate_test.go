package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"testing"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// sent is a request sent as is, without the client.
type sent struct {
	role    apikey.Role
	method  string
	path    string
	idemKey string
	body    any // encoded with encoding/json; amounts as maps, so any may be sent
}

// send sends r to the server and returns its problem document.
func (c clients) send(t *testing.T, r sent) client.Problem {
	t.Helper()
	b, err := json.Marshal(r.body)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), r.method, c.url+r.path, bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+c.keys[r.role])
	req.Header.Set("Content-Type", "application/json")
	if r.idemKey != "" {
		req.Header.Set("Idempotency-Key", r.idemKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var p client.Problem
	if err := json.Unmarshal(data, &p); err != nil {
		t.Fatalf("%s %s answered %d %s, not a problem: %v", r.method, r.path, resp.StatusCode, data, err)
	}
	return p
}

// TestClient_RefusesWhatTheServerWould: a request the server refuses for
// its content (here each sent as is, to learn the server's answer) is
// refused by the client without being sent, with the same status, problem
// type and field. A lower-case currency used to fail inside json.Marshal
// with an error that was neither a *Problem nor IsInvalid.
func TestClient_RefusesWhatTheServerWould(t *testing.T) {
	c, _ := startStipend(t)
	const agent = "agent-1"
	lower := &money.Money{Cents: 5, Currency: "usd"}
	wireLower := map[string]any{"cents": 5, "currency": "usd"}
	grant := svcCredits
	wireGrant := map[string]any{"type": "credits", "scope": map[string]any{"service": "svc"}}
	consume := client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: "v1", Cost: lower}
	wireConsume := map[string]any{"agentId": agent, "service": "svc", "tool": "t", "idempotencyKey": "v1", "cost": wireLower}
	with := func(m map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(out, kv[i].(string))
			} else {
				out[kv[i].(string)] = kv[i+1]
			}
		}
		return out
	}

	tests := []struct {
		name      string
		call      func(ctx context.Context) error
		raw       sent
		wantField string
	}{
		{"ConsumeLowerCaseCurrency", func(ctx context.Context) error { _, err := c.host.Consume(ctx, consume); return err },
			sent{apikey.RoleHost, "POST", "/v1/consume", "", wireConsume}, "cost.currency"},
		{"CheckCentsBeyondCeiling", func(ctx context.Context) error {
			r := consume
			r.Cost = &money.Money{Cents: money.MaxCents + 1, Currency: "USD"}
			_, err := c.host.Check(ctx, r)
			return err
		}, sent{apikey.RoleHost, "POST", "/v1/check", "", with(wireConsume, "cost", map[string]any{"cents": money.MaxCents + 1, "currency": "USD"})}, "cost.cents"},
		{"ConsumeNegativeUnits", func(ctx context.Context) error {
			r := consume
			r.Cost, r.Units = nil, -1
			_, err := c.host.Consume(ctx, r)
			return err
		}, sent{apikey.RoleHost, "POST", "/v1/consume", "", with(wireConsume, "cost", nil, "units", -1)}, "units"},
		{"ConsumeNoAgent", func(ctx context.Context) error {
			r := consume
			r.AgentID, r.Cost = "", nil
			_, err := c.host.Consume(ctx, r)
			return err
		}, sent{apikey.RoleHost, "POST", "/v1/consume", "", with(wireConsume, "agentId", "", "cost", nil)}, "agentId"},
		{"AuthorizeLowerCaseCurrency", func(ctx context.Context) error {
			_, err := c.host.Authorize(ctx, client.AuthorizeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: "v2", MaxCost: lower})
			return err
		}, sent{apikey.RoleHost, "POST", "/v1/authorize", "", with(wireConsume, "cost", nil, "idempotencyKey", "v2", "maxCost", wireLower)}, "maxCost.currency"},
		{"AuthorizeTTLTooLong", func(ctx context.Context) error {
			_, err := c.host.Authorize(ctx, client.AuthorizeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: "v3", TTLSeconds: 1 << 62})
			return err
		}, sent{apikey.RoleHost, "POST", "/v1/authorize", "", with(wireConsume, "cost", nil, "idempotencyKey", "v3", "ttlSeconds", int64(1<<62))}, "ttlSeconds"},
		{"CaptureLowerCaseCurrency", func(ctx context.Context) error {
			_, err := c.host.CaptureHold(ctx, "hold-1", client.CaptureRequest{AgentID: agent, Cost: lower})
			return err
		}, sent{apikey.RoleHost, "POST", "/v1/holds/hold-1/capture", "", map[string]any{"agentId": agent, "cost": wireLower}}, "cost.currency"},
		{"ReleaseNoAgent", func(ctx context.Context) error { _, err := c.host.ReleaseHold(ctx, "hold-1", ""); return err },
			sent{apikey.RoleHost, "POST", "/v1/holds/hold-1/release", "", map[string]any{"agentId": ""}}, "agentId"},
		{"RefundLowerCaseCurrency", func(ctx context.Context) error {
			_, err := c.billing.RefundConsumption(ctx, "cons-1", "refund-v1", client.RefundRequest{Cost: lower})
			return err
		}, sent{apikey.RoleBilling, "POST", "/v1/consumptions/cons-1/refund", "refund-v1", map[string]any{"cost": wireLower}}, "cost.currency"},
		{"PaymentLowerCaseCurrency", func(ctx context.Context) error {
			_, _, err := c.billing.CreatePayment(ctx, "pay-v1", client.PaymentRequest{AgentID: agent, Amount: *lower, Provider: payment.ProviderManual, Grant: grant})
			return err
		}, sent{apikey.RoleBilling, "POST", "/v1/payments", "pay-v1", map[string]any{"agentId": agent, "amount": wireLower, "provider": "manual", "grant": wireGrant}}, "amount.currency"},
		{"PaymentNoAmount", func(ctx context.Context) error {
			_, _, err := c.billing.CreatePayment(ctx, "pay-v2", client.PaymentRequest{AgentID: agent, Provider: payment.ProviderManual, Grant: grant})
			return err
		}, sent{apikey.RoleBilling, "POST", "/v1/payments", "pay-v2", map[string]any{"agentId": agent, "provider": "manual", "grant": wireGrant}}, "amount"},
		{"GrantLowerCaseCurrency", func(ctx context.Context) error {
			_, err := c.admin.GrantEntitlement(ctx, agent, "grant-v1", client.EntitlementGrant{Grant: grant, Balance: lower})
			return err
		}, sent{apikey.RoleAdmin, "POST", "/v1/accounts/agent-1/entitlements", "grant-v1", with(wireGrant, "balance", wireLower)}, "balance.currency"},
		{"GrantWithoutKey", func(ctx context.Context) error {
			_, err := c.admin.GrantEntitlement(ctx, agent, "", client.EntitlementGrant{Grant: grant, Balance: &money.Money{Cents: 5, Currency: "USD"}})
			return err
		}, sent{apikey.RoleAdmin, "POST", "/v1/accounts/agent-1/entitlements", "", with(wireGrant, "balance", map[string]any{"cents": 5, "currency": "USD"})}, "Idempotency-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := c.requests.Load()
			err := tt.call(t.Context())
			if n := c.requests.Load() - before; n != 0 {
				t.Errorf("the client sent %d requests, want none", n)
			}
			var got *client.Problem
			if !errors.As(err, &got) || !client.IsInvalid(err) {
				t.Fatalf("error = %v (%T), want an invalid *client.Problem", err, err)
			}
			if len(got.Errors) != 1 || got.Errors[0].Field != tt.wantField || got.RequestID != "" {
				t.Errorf("problem = %+v, want one error naming %q and no request id", got, tt.wantField)
			}
			want := c.send(t, tt.raw)
			if got.Status != want.Status || got.Type != want.Type || got.Title != want.Title {
				t.Errorf("client's problem = %d %s %q, server's = %d %s %q", got.Status, got.Type, got.Title, want.Status, want.Type, want.Title)
			}
			// The ledger's missing-key problem names no field yet (issue 14, item 6).
			if len(want.Errors) > 0 && want.Errors[0].Field != tt.wantField {
				t.Errorf("server's problem names %q, want %q as the client does", want.Errors[0].Field, tt.wantField)
			}
		})
	}
}

// TestAmount: a priced call takes one expression; an amount the helpers
// made wrong is refused unsent like any other.
func TestAmount(t *testing.T) {
	if got, want := client.USD(150), (&money.Money{Cents: 150, Currency: "USD"}); *got != *want {
		t.Errorf("USD(150) = %+v, want %+v", got, want)
	}
	if got, want := client.Amount(150, "EUR"), (&money.Money{Cents: 150, Currency: "EUR"}); *got != *want {
		t.Errorf("Amount(150, EUR) = %+v, want %+v", got, want)
	}
	c, _ := startStipend(t)
	_, err := c.host.Consume(t.Context(), client.ConsumeRequest{AgentID: "a", Service: "s", Tool: "t", IdempotencyKey: "k", Cost: client.Amount(150, "eur")})
	var p *client.Problem
	if !client.IsInvalid(err) || !errors.As(err, &p) || len(p.Errors) != 1 || p.Errors[0].Field != "cost.currency" {
		t.Errorf("Consume with Amount(150, \"eur\") = %v, want invalid naming cost.currency", err)
	}
}
