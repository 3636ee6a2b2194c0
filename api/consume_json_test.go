package api_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// TestConsumeAnswerEncoding: the hand-written consume answer is byte for
// byte what encoding/json makes of the same value, for every shape.
func TestConsumeAnswerEncoding(t *testing.T) {
	rem := int64(7)
	at := time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)
	tests := map[string]entitlement.Consumption{
		"Credits": {ID: "c1", AgentID: "a", EntitlementID: "e", EntitlementType: entitlement.TypeCredits, Service: "s", Tool: "t",
			IdempotencyKey: "k", Cost: money.Money{Cents: 25, Currency: "USD"}, Units: 1, OccurredAt: at,
			BalanceAfter: money.Money{Cents: 0, Currency: "USD"}, Fingerprint: "hidden"},
		"Quota": {ID: "c2", AgentID: "a", EntitlementID: "e", EntitlementType: entitlement.TypeQuota, Service: "s", Tool: "t",
			IdempotencyKey: "k", Units: 3, OccurredAt: at.Truncate(time.Second), RemainingAfter: &rem},
		"Wallet": {ID: "c5", AgentID: "member", EntitlementID: "e", EntitlementType: entitlement.TypeCredits, WalletID: "team",
			Service: "s", Tool: "t", IdempotencyKey: "k", Cost: money.Money{Cents: 3, Currency: "USD"}, Units: 1, OccurredAt: at,
			BalanceAfter: money.Money{Cents: 97, Currency: "USD"}},
		"Subscription": {ID: "c3", AgentID: "a", EntitlementID: "e", EntitlementType: entitlement.TypeSubscription,
			Service: "s", Tool: "t", IdempotencyKey: "k", Units: 1, OccurredAt: at},
		"Escapes": {ID: "c4", AgentID: `a"<b>&\`, EntitlementID: "e", EntitlementType: entitlement.TypeCredits, Service: "s p",
			Tool: "t\u00e9\u2028", IdempotencyKey: "key with / and \t", Cost: money.Money{Cents: -1<<53 + 1, Currency: "EUR"},
			Units: 1, OccurredAt: at.In(time.FixedZone("x", 3600))},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			for _, result := range []store.Outcome{store.Consumed, store.Replay} {
				want, err := json.Marshal(api.ConsumeAnswer{Result: result, Consumption: &c})
				if err != nil {
					t.Fatal(err)
				}
				if got := api.AppendConsumeAnswer(nil, result, &c); string(got) != string(want) {
					t.Errorf("appendConsumeAnswer:\n got %s\nwant %s", got, want)
				}
			}
		})
	}
}
