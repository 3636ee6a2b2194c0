package conformance

import (
	"errors"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/store"
)

// holdRequest returns a hold request on testService/testTool of at most
// cents USD, with the default TTL.
func holdRequest(agentID, key string, cents int64) entitlement.HoldRequest {
	return entitlement.HoldRequest{ConsumeRequest: request(agentID, key, cents)}
}

func authorize(t *testing.T, s store.EntitlementStore, req entitlement.HoldRequest) store.HoldResult {
	t.Helper()
	return must(s.Authorize(t.Context(), req))(t, "Authorize(key %q)", req.IdempotencyKey)
}

// mustAuthorize authorizes and fails the test unless the outcome is Held.
func mustAuthorize(t *testing.T, s store.EntitlementStore, req entitlement.HoldRequest) store.HoldResult {
	t.Helper()
	res := authorize(t, s, req)
	holdAnswer(req, res).mustGrant(t, store.Held, "hold")
	return res
}

// mustCapture captures h with a and fails the test unless the outcome is Captured.
func mustCapture(t *testing.T, s store.EntitlementStore, h entitlement.Hold, a entitlement.Amount) store.HoldResult {
	t.Helper()
	res, err := s.CaptureHold(t.Context(), h.ID, h.AgentID, a)
	if err != nil || res.Outcome != store.Captured || res.Consumption.ID == "" {
		t.Fatalf("CaptureHold(%s) = %s, %v; want captured with a consumption", h.ID, res.Outcome, err)
	}
	return res
}

// mustRelease releases h and fails the test unless the outcome is want.
func mustRelease(t *testing.T, s store.EntitlementStore, h entitlement.Hold, want store.Outcome) store.HoldResult {
	t.Helper()
	res, err := s.ReleaseHold(t.Context(), h.ID, h.AgentID)
	if err != nil || res.Outcome != want {
		t.Fatalf("ReleaseHold(%s) = %s, %v; want %s", h.ID, res.Outcome, err, want)
	}
	return res
}

func getHold(t *testing.T, s store.EntitlementStore, id string) entitlement.Hold {
	t.Helper()
	return must(s.GetHold(t.Context(), id))(t, "GetHold(%s)", id)
}

// wantHoldStatus fails unless the stored hold id has status, ended at
// endedAt (zero: not ended).
func wantHoldStatus(t *testing.T, s store.EntitlementStore, id string, status entitlement.HoldStatus, endedAt time.Time) entitlement.Hold {
	t.Helper()
	h := getHold(t, s, id)
	var got time.Time
	if h.EndedAt != nil {
		got = *h.EndedAt
	}
	if h.Status != status || !got.Equal(endedAt) {
		t.Errorf("GetHold(%s) = status %s, endedAt %v; want %s, %v", id, h.Status, h.EndedAt, status, endedAt)
	}
	return h
}

// wantEndedUncharged checks that hold id ended in status at endedAt, that
// its entitlement eid holds nothing and has balance left, and that the
// agent was charged nothing by what ended it (after).
func wantEndedUncharged(t *testing.T, s store.EntitlementStore, id string, status entitlement.HoldStatus, endedAt time.Time, eid string, balance int64, agent, after string) {
	t.Helper()
	wantHoldStatus(t, s, id, status, endedAt)
	wantHeld(t, s, eid, 0, balance)
	wantNoConsumptions(t, s, agent, after)
}

// amountCase is an amount a capture or a refund refuses, and the field its
// error names.
type amountCase struct {
	name, field string
	a           entitlement.Amount
}

// foreignOrNegative are the amounts every capture and refund refuses,
// whatever it charged or holds: another currency, a negative cost.
var foreignOrNegative = []amountCase{
	{"another currency", "cost.currency", entitlement.Amount{Cost: &money.Money{Cents: 1, Currency: "EUR"}}},
	{"negative cost", "cost.cents", entitlement.Amount{Cost: ptr(usd(-1))}},
}

// wantNoConsumptions fails if the agent has stored consumptions (after
// says after what).
func wantNoConsumptions(t *testing.T, s store.EntitlementStore, agent, after string) {
	t.Helper()
	if got := listAllConsumptions(t, s, agent, time.Time{}); len(got) != 0 {
		t.Errorf("%s stored consumptions: %+v", after, got)
	}
}

// wantField reports a failure unless err has code want and carries a
// *field.Error naming name.
func wantField(t *testing.T, call string, err error, want store.Code, name string) {
	t.Helper()
	wantCode(t, call, err, want)
	var fe *field.Error
	if !errors.As(err, &fe) || fe.Field != name {
		t.Errorf("%s: got error %v, want one naming the field %s", call, err, name)
	}
}

// wantConflictOf reports a failure unless err is a Conflict wrapping cause.
func wantConflictOf(t *testing.T, call string, err, cause error) {
	t.Helper()
	wantCode(t, call, err, store.CodeConflict)
	if !errors.Is(err, cause) {
		t.Errorf("%s: got error %v, want one wrapping %q", call, err, cause)
	}
}

// heldOf returns what e shows held: cents for credits, units for a quota.
func heldOf(e entitlement.Entitlement) int64 {
	if e.Type == entitlement.TypeQuota {
		return e.Quota.Held
	}
	return e.Credits.Held.Cents
}

// wantHeld fails unless the stored entitlement id shows held (cents or
// units) held of balance (cents or remaining units).
func wantHeld(t *testing.T, s store.EntitlementStore, id string, held, balance int64) {
	t.Helper()
	e := getEntitlement(t, s, id)
	got := e.Credits.Balance.Cents
	if e.Type == entitlement.TypeQuota {
		got = e.Quota.Remaining
	}
	if heldOf(e) != held || got != balance {
		t.Errorf("GetEntitlement(%s) = held %d of %d, want %d of %d", id, heldOf(e), got, held, balance)
	}
}
