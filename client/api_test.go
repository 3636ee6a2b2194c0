package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/memledger"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store/memory"
)

// clients are clients of one real Stipend server, one per role, and the
// server's clock, store, URL and raw keys, and how many requests it got.
type clients struct {
	host, billing, admin *client.Client
	clock                *conformance.Clock
	store                *memory.Store
	url                  string
	keys                 map[apikey.Role]string
	requests             *atomic.Int64
}

// svcCredits is the grant most tests give: credits for the service "svc".
var svcCredits = payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "svc"}}

// startStipend runs the REST service on the memory store on loopback, as
// `stipend serve` runs it: its key-requiring routes go through an
// idempotency ledger (in memory). Its clock moves only when told. It
// answers with the test's context, for the calls.
func startStipend(t *testing.T, opts ...func(*api.Config)) (clients, context.Context) {
	t.Helper()
	var entries []apikey.Key
	raw := map[apikey.Role]string{}
	for _, role := range []apikey.Role{apikey.RoleHost, apikey.RoleBilling, apikey.RoleAdmin} {
		r, k, err := apikey.Generate(string(role), role, nil)
		if err != nil {
			t.Fatal(err)
		}
		raw[role] = r
		entries = append(entries, k)
	}
	keys, err := apikey.NewSet(entries)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := receipt.NewEphemeralKeyring()
	if err != nil {
		t.Fatal(err)
	}
	clock := conformance.NewClock()
	st := memory.New(memory.WithClock(clock.Now))
	cfg := api.Config{Store: st, Keys: keys, Signer: signer,
		Development: true, Now: clock.Now, Webhooks: &api.WebhookConfig{AllowPrivate: true}}
	for _, o := range opts {
		o(&cfg)
	}
	srv, err := api.New(cfg)
	if err != nil {
		t.Fatalf("api.New: %v", err)
	}
	srv.UseLedger(memledger.New("client-test"), idempotency.Options{Namespace: "client-test", Development: true})
	requests := new(atomic.Int64)
	h := srv.Handler()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	mk := func(role apikey.Role) *client.Client {
		c, err := client.New(ts.URL, raw[role])
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return clients{host: mk(apikey.RoleHost), billing: mk(apikey.RoleBilling), admin: mk(apikey.RoleAdmin), clock: clock,
		store: st, url: ts.URL, keys: raw, requests: requests}, t.Context()
}

// TestClient_AgainstTheService checks the client's requests and decoding
// against the real REST service, route by route.
func TestClient_AgainstTheService(t *testing.T) {
	c, ctx := startStipend(t)
	const agent = "agent-1"
	usd := client.USD

	acct, err := c.billing.PutAccount(ctx, agent, client.AccountUpdate{DisplayName: "Agent One"})
	if err != nil || acct.AgentID != agent || acct.DisplayName != "Agent One" {
		t.Fatalf("PutAccount = %+v, %v", acct, err)
	}
	if got, err := c.billing.GetAccount(ctx, agent); err != nil || got.DisplayName != "Agent One" {
		t.Errorf("GetAccount = %+v, %v", got, err)
	}

	grant := svcCredits
	granted, err := c.admin.GrantEntitlement(ctx, agent, "grant-1", client.EntitlementGrant{Grant: grant, Balance: usd(7)})
	if err != nil || granted.Credits.Balance != *usd(7) {
		t.Fatalf("GrantEntitlement = %+v, %v", granted, err)
	}

	req := client.ConsumeRequest{AgentID: agent, Service: "svc", Tool: "t", IdempotencyKey: "k1", Cost: usd(5)}
	check, err := c.host.Check(ctx, req)
	if err != nil || check.Result != "allowed" || check.Entitlement == nil || check.Entitlement.ID != granted.ID {
		t.Errorf("Check = %+v, %v; want allowed on %s", check, err, granted.ID)
	}
	res, err := c.host.Consume(ctx, req)
	if err != nil || res.Result != client.ResultConsumed || res.Consumption.BalanceAfter != *usd(2) {
		t.Fatalf("Consume = %+v, %v; want consumed leaving 2 USD", res, err)
	}
	if again, err := c.host.Consume(ctx, req); err != nil || again.Result != client.ResultReplay || again.Consumption.ID != res.Consumption.ID {
		t.Errorf("Consume again = %+v, %v; want a replay of %s", again, err, res.Consumption.ID)
	}

	t.Run("PaymentRequired", func(t *testing.T) {
		r := req
		r.IdempotencyKey = "k2"
		_, err := c.host.Consume(ctx, r)
		var p *client.Problem
		if !client.IsPaymentRequired(err) || !errors.As(err, &p) {
			t.Fatalf("Consume beyond the balance: %v, want payment required", err)
		}
		want := []entitlement.Denial{{EntitlementID: granted.ID, Reason: entitlement.ReasonInsufficientBalance}}
		if len(p.Reasons) != 1 || p.Reasons[0] != want[0] || p.Type == "" || p.RequestID == "" {
			t.Errorf("problem = %+v, want type, request id and reasons %v", p, want)
		}
	})
	t.Run("KeyReused", func(t *testing.T) {
		r := req
		r.Cost = usd(1)
		if _, err := c.host.Consume(ctx, r); !client.IsKeyReused(err) || client.IsConflict(err) {
			t.Errorf("Consume with a reused key and another cost: %v, want key reused (and not a conflict)", err)
		}
	})
	t.Run("FieldErrors", func(t *testing.T) {
		r := req
		r.IdempotencyKey = ""
		_, err := c.host.Consume(ctx, r)
		var p *client.Problem
		if !client.IsInvalid(err) || !errors.As(err, &p) || len(p.Errors) == 0 || p.Errors[0].Field != "idempotencyKey" {
			t.Errorf("Consume without a key: %v, want a 400 naming idempotencyKey", err)
		}
	})
	t.Run("WrongRole", func(t *testing.T) {
		if _, err := c.host.GetAccount(ctx, agent); !client.IsUnauthorized(err) {
			t.Errorf("GetAccount with a host key: %v, want unauthorized", err)
		}
	})
	t.Run("NotFound", func(t *testing.T) {
		if _, err := c.billing.GetEntitlement(ctx, "no-such-entitlement"); !client.IsNotFound(err) {
			t.Errorf("GetEntitlement of a missing ID: %v, want not found", err)
		}
	})

	list, err := c.billing.ListEntitlements(ctx, agent, client.EntitlementFilter{Service: "svc", Type: entitlement.TypeCredits}, client.Page{Limit: 10})
	if err != nil || len(list.Items) != 1 || list.Items[0].ID != granted.ID {
		t.Errorf("ListEntitlements = %+v, %v; want the one grant", list, err)
	}
	used, err := c.billing.ListConsumptions(ctx, agent, acct.CreatedAt, client.Page{})
	if err != nil || len(used.Items) != 1 || used.Items[0].ID != res.Consumption.ID {
		t.Errorf("ListConsumptions = %+v, %v; want the one consumption", used, err)
	}

	// A payment: create (twice, one key), succeed, refund; a second one fails.
	pr := client.PaymentRequest{AgentID: agent, Amount: *usd(300), Provider: payment.ProviderManual, Grant: grant}
	p, created, err := c.billing.CreatePayment(ctx, "pay-1", pr)
	if err != nil || !created || p.Status != payment.StatusPending {
		t.Fatalf("CreatePayment = %+v, created %v, %v", p, created, err)
	}
	if again, created, err := c.billing.CreatePayment(ctx, "pay-1", pr); err != nil || created || again.ID != p.ID {
		t.Errorf("CreatePayment again = %+v, created %v, %v; want %s, not created", again, created, err, p.ID)
	}
	other := pr
	other.Amount = *usd(301)
	if _, _, err := c.billing.CreatePayment(ctx, "pay-1", other); !client.IsKeyReused(err) || client.IsConflict(err) {
		t.Errorf("CreatePayment with a reused key and another amount: %v, want key reused (and not a conflict)", err)
	}
	done, err := c.billing.SucceedPayment(ctx, p.ID)
	if err != nil || done.Payment.Status != payment.StatusSucceeded || done.Receipt.JWS == "" || len(done.Entitlements) != 1 {
		t.Fatalf("SucceedPayment = %+v, %v", done, err)
	}
	if got, err := c.billing.GetPayment(ctx, p.ID); err != nil || got.Status != payment.StatusSucceeded {
		t.Errorf("GetPayment = %+v, %v; want succeeded", got, err)
	}
	if got, err := c.billing.GetReceipt(ctx, done.Receipt.ID); err != nil || got.JWS != done.Receipt.JWS {
		t.Errorf("GetReceipt = %+v, %v; want the completion's receipt", got, err)
	}
	if got, err := c.billing.ListReceipts(ctx, agent, client.Page{}); err != nil || len(got.Items) != 1 {
		t.Errorf("ListReceipts = %+v, %v; want 1", got, err)
	}
	refund, err := c.billing.RefundPayment(ctx, p.ID)
	if err != nil || refund.Payment.Status != payment.StatusRefunded {
		t.Errorf("RefundPayment = %+v, %v; want refunded", refund, err)
	}
	p2, _, err := c.billing.CreatePayment(ctx, "pay-2", pr)
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	if failed, err := c.billing.FailPayment(ctx, p2.ID, "card declined"); err != nil || failed.Status != payment.StatusFailed {
		t.Errorf("FailPayment = %+v, %v; want failed", failed, err)
	}
	if revoked, err := c.admin.RevokeEntitlement(ctx, granted.ID); err != nil || revoked.Status != entitlement.StatusRevoked {
		t.Errorf("RevokeEntitlement = %+v, %v; want revoked", revoked, err)
	}
}
