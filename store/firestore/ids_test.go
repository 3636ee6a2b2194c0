package firestore_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// TestStore_IDsThatAreNotDocumentIDs stores values that Firestore cannot use
// as document IDs as they are ("/", "..", reserved "__x__" names): they are
// encoded, never rejected or truncated, and read back unchanged.
func TestStore_IDsThatAreNotDocumentIDs(t *testing.T) {
	ctx := context.Background()
	s := newStore(t, fixedNow)
	for _, tc := range []struct{ agent, entitlementID string }{
		{"team/agent.1", "ent/1"},
		{"..", "__reserved__"},
		{"h__looks-encoded", "."},
	} {
		e, err := s.CreateEntitlement(ctx, entitlement.Entitlement{
			ID: tc.entitlementID, AgentID: tc.agent, Type: entitlement.TypeCredits,
			Scope: entitlement.Scope{Service: "search"}, Credits: entitlement.Credits{Balance: usd(100)},
		})
		if err != nil {
			t.Fatalf("CreateEntitlement(%q, %q): %v", tc.agent, tc.entitlementID, err)
		}
		got, err := s.GetEntitlement(ctx, tc.entitlementID)
		if err != nil || got.ID != tc.entitlementID || got.AgentID != tc.agent {
			t.Errorf("GetEntitlement(%q): got %q of %q, %v; want it back", tc.entitlementID, got.ID, got.AgentID, err)
		}
		if a, err := s.GetAccount(ctx, tc.agent); err != nil || a.AgentID != tc.agent {
			t.Errorf("GetAccount(%q): got %q, %v", tc.agent, a.AgentID, err)
		}
		res, err := s.CheckAndConsume(ctx, consumeReq(tc.agent, "key/with/../slashes", 5))
		if err != nil || res.Outcome != store.Consumed || res.Entitlement.ID != e.ID {
			t.Errorf("CheckAndConsume for %q: %+v, %v; want consumed from %q", tc.agent, res, err, e.ID)
		}
	}

	key := "order/42/../__x__"
	p := payment.Payment{
		AgentID: "team/agent.1", Amount: money.Money{Cents: 500, Currency: "EUR"}, Provider: payment.ProviderManual,
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey: key, Fingerprint: "f1",
	}
	created, err := s.CreatePayment(ctx, p)
	if err != nil {
		t.Fatalf("CreatePayment with key %q: %v", key, err)
	}
	found, err := s.FindPaymentByIdempotencyKey(ctx, key)
	if err != nil || found.ID != created.Payment.ID || found.IdempotencyKey != key {
		t.Errorf("FindPaymentByIdempotencyKey(%q): got %q (key %q), %v; want %q", key, found.ID, found.IdempotencyKey, err, created.Payment.ID)
	}
	if _, err := s.FindPaymentByIdempotencyKey(ctx, "order/42"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("FindPaymentByIdempotencyKey of a prefix of the key: got %v, want not found", err)
	}
}

// TestStore_CallerGivesUp: a caller whose context is already done gets an
// Unavailable error and is not charged; the same key then consumes normally.
func TestStore_CallerGivesUp(t *testing.T) {
	s := newStore(t, fixedNow)
	e := createCredits(t, s, "agent-gone", 100)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := consumeReq("agent-gone", "k1", 10)
	req.EntitlementID = e.ID
	if _, err := s.CheckAndConsume(ctx, req); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("CheckAndConsume with a cancelled context: got %v, want unavailable", err)
	}
	res, err := s.CheckAndConsume(context.Background(), req)
	if err != nil || res.Outcome != store.Consumed {
		t.Fatalf("retry with the same key: %+v, %v; want consumed", res, err)
	}
	if got, want := res.Consumption.BalanceAfter.Cents, int64(90); got != want {
		t.Errorf("balance after the retry: got %d, want %d (charged once)", got, want)
	}
}
