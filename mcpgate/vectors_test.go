package mcpgate_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

var update = flag.Bool("update", false, "rewrite testdata/vectors/refusals.json with the refusals and texts the Go gate writes")

// refusalsFile holds refusals of every kind and the text the Go gate writes
// for each; the TypeScript (typescript/test/key.test.ts) and Python
// (python/tests/test_vectors.py) suites check that their gates write the
// same text for the same refusal.
var refusalsFile = filepath.Join("testdata", "vectors", "refusals.json")

type refusalVector struct {
	Name    string           `json:"name"`
	Refusal *mcpgate.Refusal `json:"refusal"`
	Text    string           `json:"text"`
}

type refusalVectors struct {
	Comment string          `json:"comment"`
	Vectors []refusalVector `json:"vectors"`
}

func refusalCases() []refusalVector {
	usd := func(c int64) *money.Money { return &money.Money{Cents: c, Currency: "USD"} }
	onSuccess := &mcpgate.Terms{Cost: usd(5), Units: 1, Policy: mcpgate.PolicyOnSuccess}
	before := &mcpgate.Terms{Cost: usd(20), Units: 2, Policy: mcpgate.PolicyBefore}
	unitsOnly := &mcpgate.Terms{Units: 3, Policy: mcpgate.PolicyOnSuccess}
	msg := "payment required: no entitlement of this agent covers tool forecast"
	return []refusalVector{
		{Name: "payment required, no entitlement at all, purchase URL", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalPaymentRequired, Message: msg, Service: "weather", Tool: "forecast", Price: onSuccess,
			Reasons: []entitlement.Denial{{Reason: entitlement.ReasonNotFound}}, PurchaseURL: "https://example.com/buy"}},
		{Name: "payment required, two entitlements short", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalPaymentRequired, Message: msg, Service: "weather", Tool: "forecast", Price: before,
			Reasons: []entitlement.Denial{
				{EntitlementID: "e1", Reason: entitlement.ReasonInsufficientBalance},
				{EntitlementID: "e2", Reason: entitlement.ReasonQuotaExhausted}}}},
		{Name: "payment required, quota price, no reasons", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalPaymentRequired, Message: msg, Service: "weather", Tool: "forecast", Price: unitsOnly,
			PurchaseURL: "https://example.com/buy?agent=a b"}},
		{Name: "agent unknown", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalNoAgent, Service: "weather", Tool: "forecast", Price: onSuccess,
			Message: "tool forecast is paid, and the call does not say which agent pays for it"}},
		{Name: "tool not priced", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalUnpriced, Service: "weather", Tool: "secret",
			Message: "tool secret has no price configured, so it is not available"}},
		{Name: "billing unavailable", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalUnavailable, Service: "weather", Tool: "forecast", Retryable: true,
			Message: "billing is temporarily unavailable; try the call again shortly"}},
		{Name: "key conflict", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalKeyConflict, Service: "weather", Tool: "forecast",
			Message: "the idempotency key of this call was already used for a different call; send a new key"}},
		{Name: "free tool shown free", Refusal: &mcpgate.Refusal{
			Error: mcpgate.RefusalBillingError, Service: "weather", Tool: "echo", Price: &mcpgate.Terms{Free: true},
			Message: "the call could not be charged because of a billing configuration error"}},
	}
}

// TestRefusalVectors checks the committed refusal vectors against the texts
// the gate writes now (with -update: rewrites them).
func TestRefusalVectors(t *testing.T) {
	want := refusalVectors{
		Comment: "Refusals and the text the Go gate (mcpgate, Refusal.Text) writes for each; written by `go test ./mcpgate -run TestRefusalVectors -update`, checked by the TypeScript and Python gates' suites.",
	}
	for _, v := range refusalCases() {
		v.Text = v.Refusal.Text()
		want.Vectors = append(want.Vectors, v)
	}
	got, err := json.MarshalIndent(want, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if *update {
		if err := os.WriteFile(refusalsFile, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(refusalsFile)
	if err != nil {
		t.Fatalf("%v (run go test ./mcpgate -run TestRefusalVectors -update)", err)
	}
	if !bytes.Equal(committed, got) {
		t.Errorf("%s is stale: run go test ./mcpgate -run TestRefusalVectors -update\ngot:\n%s", refusalsFile, got)
	}
}
