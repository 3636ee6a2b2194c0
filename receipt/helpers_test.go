package receipt_test

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/receipt"
)

// sampleReceipt is a valid payment receipt with a credits and a quota grant.
func sampleReceipt(tb testing.TB) receipt.Receipt {
	tb.Helper()
	usd := func(c int64) money.Money {
		m, err := money.New(c, "USD")
		if err != nil {
			tb.Fatal(err)
		}
		return m
	}
	return receipt.Receipt{
		ID:        "rcpt-1",
		Version:   receipt.Version,
		Kind:      receipt.KindPayment,
		Issuer:    "https://stipend.example",
		AgentID:   "agent-1",
		PaymentID: "pay-1",
		Amount:    usd(1500),
		Grants: []receipt.Grant{
			{EntitlementID: "ent-1", Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}, Balance: usd(1500)},
			{EntitlementID: "ent-2", Type: entitlement.TypeQuota, Scope: entitlement.Scope{Service: "search", Tools: []string{"web"}}, Limit: 100, Period: entitlement.PeriodDay},
		},
		IssuedAt: time.Date(2026, 11, 30, 10, 0, 0, 123456000, time.UTC),
	}
}

// newKeyring returns a keyring of freshly generated keys: the first signs.
func newKeyring(tb testing.TB, files ...[]byte) *receipt.Keyring {
	tb.Helper()
	if len(files) == 0 {
		files = [][]byte{generateKey(tb)}
	}
	k, err := receipt.LoadKeyring(files...)
	if err != nil {
		tb.Fatalf("LoadKeyring: %v", err)
	}
	return k
}

func generateKey(tb testing.TB) []byte {
	tb.Helper()
	b, err := receipt.GenerateKey()
	if err != nil {
		tb.Fatalf("GenerateKey: %v", err)
	}
	return b
}
