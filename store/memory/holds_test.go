package memory_test

import (
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// The conformance suites compare holds without their fingerprints; the
// memory store keeps the hold request's, and a capture's consumption carries
// the same one, so the key stays a hold's for every later call.
func TestStore_HoldFingerprints(t *testing.T) {
	s, credits, _ := consumptionStore(t)
	req := entitlement.HoldRequest{ConsumeRequest: entitlement.ConsumeRequest{
		AgentID: "agent-1", Service: "search", Tool: "q", IdempotencyKey: "h",
		Cost: &money.Money{Cents: 30, Currency: "USD"}, EntitlementID: credits,
	}}
	res, err := s.Authorize(t.Context(), req)
	if err != nil || res.Outcome != store.Held {
		t.Fatalf("Authorize = %s, %v; want held", res.Outcome, err)
	}
	if err := req.Normalize(); err != nil {
		t.Fatal(err)
	}
	want := req.Fingerprint()
	if res.Hold.Fingerprint != want {
		t.Errorf("Authorize: hold fingerprint %q, want %q", res.Hold.Fingerprint, want)
	}
	captured, err := s.CaptureHold(t.Context(), res.Hold.ID, "agent-1", entitlement.Amount{})
	if err != nil || captured.Outcome != store.Captured {
		t.Fatalf("CaptureHold = %s, %v; want captured", captured.Outcome, err)
	}
	used, err := s.FindKey(t.Context(), "agent-1", "h")
	if err != nil {
		t.Fatalf("FindKey: %v", err)
	}
	if used.Hold.ID != res.Hold.ID || used.Hold.Fingerprint != want || used.Consumption.Fingerprint != want || used.Consumption.HoldID != res.Hold.ID {
		t.Errorf("FindKey = hold %q (fingerprint %q), consumption of hold %q (fingerprint %q); want hold %s and its capture, both with %q",
			used.Hold.ID, used.Hold.Fingerprint, used.Consumption.HoldID, used.Consumption.Fingerprint, res.Hold.ID, want)
	}
}
