package conformance

import (
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// topUpTests are the contract of store.TopUps: settings and the saved
// method, the compare-and-set that begins a top-up, the daily cap, failures
// that disable top-up, and the sweep's list.
var topUpTests = []subtest{
	{"TopUpSettings", testTopUpSettings},
	{"TopUpBegin", testTopUpBegin},
	{"TopUpDailyCap", testTopUpDailyCap},
	{"TopUpFailures", testTopUpFailures},
	{"TopUpList", testTopUpList},
}

// topUpConcurrencyTests: concurrent beginners of one crossing (on a fleet
// of store instances where the backend has one) begin one top-up.
var topUpConcurrencyTests = []subtest{
	{"TopUpConcurrentBegin", testTopUpConcurrentBegin},
}

func topUpSettings() topup.Settings {
	return topup.Settings{Threshold: usd(200), Amount: usd(1000), Scope: entitlement.Scope{Service: "search", Tools: []string{"query"}}, DailyCap: usd(2000)}
}

// enabledTopUp makes an account for a new agent with a saved method and
// topUpSettings enabled.
func enabledTopUp(t *testing.T, s store.EntitlementStore) string {
	t.Helper()
	agent := newAgent()
	if _, err := s.SaveTopUpMethod(t.Context(), agent, topup.Method{Customer: "cus_1", PaymentMethod: "pm_1"}); err != nil {
		t.Fatalf("SaveTopUpMethod: %v", err)
	}
	if _, err := s.PutTopUp(t.Context(), agent, topUpSettings()); err != nil {
		t.Fatalf("PutTopUp: %v", err)
	}
	return agent
}

func getTopUp(t *testing.T, s store.EntitlementStore, agent string) topup.TopUp {
	t.Helper()
	return must(s.GetTopUp(t.Context(), agent))(t, "GetTopUp(%s)", agent)
}

func beginTopUp(t *testing.T, s store.EntitlementStore, agent string, seq int64) payment.Payment {
	t.Helper()
	return must(s.BeginTopUp(t.Context(), agent, seq))(t, "BeginTopUp(%s, %d)", agent, seq)
}

// wantRefused checks that err is a Conflict wrapping why.
func wantRefused(t *testing.T, call string, err, why error) {
	t.Helper()
	wantCode(t, call, err, store.CodeConflict)
	if !errors.Is(err, why) {
		t.Errorf("%s: got %v, want it to wrap %q", call, err, why)
	}
}

func testTopUpSettings(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	_, err := s.GetTopUp(ctx, agent)
	wantCode(t, "GetTopUp(unknown account)", err, store.CodeNotFound)
	_, err = s.PutTopUp(ctx, agent, topUpSettings())
	wantCode(t, "PutTopUp(unknown account)", err, store.CodeNotFound)
	if _, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: agent}); err != nil {
		t.Fatalf("UpsertAccount: %v", err)
	}
	if got := getTopUp(t, s, agent); got.AgentID != agent || got.Enabled || got.Settings != nil || got.Method != nil || got.Seq != 0 {
		t.Errorf("GetTopUp(never set) = %+v, want the zero top-up of %s", got, agent)
	}
	_, err = s.PutTopUp(ctx, agent, topUpSettings())
	wantRefused(t, "PutTopUp(no method)", err, topup.ErrNoMethod)
	bad := topUpSettings()
	bad.Threshold.Currency = "EUR"
	_, err = s.PutTopUp(ctx, agent, bad)
	wantCode(t, "PutTopUp(threshold in EUR)", err, store.CodeInvalid)
	_, err = s.SaveTopUpMethod(ctx, agent, topup.Method{Customer: "cus_1"})
	wantCode(t, "SaveTopUpMethod(no payment method)", err, store.CodeInvalid)

	m := topup.Method{Customer: "cus_1", PaymentMethod: "pm_1"}
	if _, err := s.SaveTopUpMethod(ctx, agent, m); err != nil {
		t.Fatalf("SaveTopUpMethod: %v", err)
	}
	clock.Advance(time.Second)
	put, err := s.PutTopUp(ctx, agent, topUpSettings())
	if err != nil {
		t.Fatalf("PutTopUp: %v", err)
	}
	want := topup.TopUp{AgentID: agent, Settings: ptr(topUpSettings()), Enabled: true, Method: &m, UpdatedAt: clock.Now()}
	if diff := cmpDiff(want, put, equate); diff != "" {
		t.Errorf("PutTopUp (-want +got):\n%s", diff)
	}
	if diff := cmpDiff(put, getTopUp(t, s, agent), equate); diff != "" {
		t.Errorf("GetTopUp after PutTopUp (-put +get):\n%s", diff)
	}
	off, err := s.DisableTopUp(ctx, agent, "by the operator")
	if err != nil {
		t.Fatalf("DisableTopUp: %v", err)
	}
	if off.Enabled || off.DisabledReason != "by the operator" || off.Settings == nil {
		t.Errorf("DisableTopUp = enabled %v, reason %q, settings %v; want disabled by the operator, settings kept", off.Enabled, off.DisabledReason, off.Settings)
	}
	_, err = s.DisableTopUp(ctx, newAgent(), "x")
	wantCode(t, "DisableTopUp(unknown account)", err, store.CodeNotFound)
	// SaveTopUpMethod creates the account it saves for.
	fresh := newAgent()
	if _, err := s.SaveTopUpMethod(ctx, fresh, m); err != nil {
		t.Fatalf("SaveTopUpMethod(new agent): %v", err)
	}
	if _, err := s.GetAccount(ctx, fresh); err != nil {
		t.Errorf("GetAccount after SaveTopUpMethod: %v", err)
	}
}

func testTopUpBegin(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := enabledTopUp(t, s)
	p := beginTopUp(t, s, agent, 0)
	if p.ID != topup.PaymentID(agent, 1) || p.IdempotencyKey != topup.PaymentKey(agent, 1) || p.Status != payment.StatusPending ||
		p.Provider != payment.ProviderStripe || p.Amount != usd(1000) || p.Grant.Type != entitlement.TypeCredits || p.Grant.Scope.Service != "search" {
		t.Errorf("BeginTopUp = %+v; want the pending stripe payment %s of 1000 USD keyed %s granting credits on search",
			p, topup.PaymentID(agent, 1), topup.PaymentKey(agent, 1))
	}
	if got, err := s.FindPaymentByIdempotencyKey(ctx, topup.PaymentKey(agent, 1)); err != nil || got.ID != p.ID {
		t.Errorf("FindPaymentByIdempotencyKey(top-up 1) = %q, %v; want %q", got.ID, err, p.ID)
	}
	got := getTopUp(t, s, agent)
	if got.Seq != 1 || got.PendingPaymentID != p.ID || got.Day != clock.Now().UTC().Format(time.DateOnly) || got.DayTotal != usd(1000) {
		t.Errorf("GetTopUp after BeginTopUp = seq %d, pending %q, day %s %v; want 1, %q, today 1000 USD", got.Seq, got.PendingPaymentID, got.Day, got.DayTotal, p.ID)
	}
	_, err := s.BeginTopUp(ctx, agent, 0)
	wantRefused(t, "BeginTopUp(stale sequence)", err, topup.ErrMoved)
	_, err = s.BeginTopUp(ctx, agent, 1)
	wantRefused(t, "BeginTopUp(one pending)", err, topup.ErrPending)
	_, err = s.BeginTopUp(ctx, newAgent(), 0)
	wantCode(t, "BeginTopUp(unknown account)", err, store.CodeNotFound)

	// The success settles the top-up at the next begin (or SettleTopUp).
	if _, err := s.CompletePayment(ctx, p.ID, signing); err != nil {
		t.Fatalf("CompletePayment: %v", err)
	}
	settled, err := s.SettleTopUp(ctx, agent)
	if err != nil || settled.PendingPaymentID != "" || settled.Failures != 0 {
		t.Errorf("SettleTopUp after success = pending %q, failures %d, %v; want none pending, 0", settled.PendingPaymentID, settled.Failures, err)
	}
	p2 := beginTopUp(t, s, agent, 1)
	if p2.ID != topup.PaymentID(agent, 2) {
		t.Errorf("second BeginTopUp = payment %s, want %s", p2.ID, topup.PaymentID(agent, 2))
	}
	if _, err := s.DisableTopUp(ctx, agent, "off"); err != nil {
		t.Fatalf("DisableTopUp: %v", err)
	}
	if _, err := s.FailPayment(ctx, p2.ID, store.PaymentChange{Reason: "declined"}); err != nil {
		t.Fatalf("FailPayment: %v", err)
	}
	_, err = s.BeginTopUp(ctx, agent, 2)
	wantRefused(t, "BeginTopUp(disabled)", err, topup.ErrDisabled)
}

func testTopUpDailyCap(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	clock.Set(time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC))
	agent := enabledTopUp(t, s) // 1000 a top-up, 2000 a day
	for seq := range int64(2) {
		p := beginTopUp(t, s, agent, seq)
		if _, err := s.CompletePayment(ctx, p.ID, signing); err != nil {
			t.Fatalf("CompletePayment: %v", err)
		}
	}
	_, err := s.BeginTopUp(ctx, agent, 2)
	wantRefused(t, "BeginTopUp(third of the day)", err, topup.ErrDailyCap)
	if got := getTopUp(t, s, agent); got.Seq != 2 || got.PendingPaymentID != "" || got.DayTotal != usd(2000) {
		t.Errorf("GetTopUp after the cap refused = seq %d, pending %q, total %v; want 2, none, 2000 USD", got.Seq, got.PendingPaymentID, got.DayTotal)
	}
	clock.Set(time.Date(2026, 3, 5, 0, 0, 0, 0, time.UTC)) // the next UTC day
	p := beginTopUp(t, s, agent, 2)
	if got := getTopUp(t, s, agent); got.Day != "2026-03-05" || got.DayTotal != usd(1000) {
		t.Errorf("GetTopUp on the next day = %s %v, want 2026-03-05 1000 USD", got.Day, got.DayTotal)
	}
	// A failed top-up gives its amount back to the day's total.
	if _, err := s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "declined"}); err != nil {
		t.Fatalf("FailPayment: %v", err)
	}
	if got, err := s.SettleTopUp(ctx, agent); err != nil || got.DayTotal.Cents != 0 {
		t.Errorf("SettleTopUp after a failure = total %v, %v; want 0", got.DayTotal, err)
	}
}

func testTopUpFailures(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := enabledTopUp(t, s)
	s0 := topUpSettings()
	s0.DailyCap = usd(100000)
	if _, err := s.PutTopUp(ctx, agent, s0); err != nil {
		t.Fatalf("PutTopUp: %v", err)
	}
	fail := func(seq int64) payment.Payment {
		t.Helper()
		p := beginTopUp(t, s, agent, seq)
		if _, err := s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "stripe: card_declined"}); err != nil {
			t.Fatalf("FailPayment: %v", err)
		}
		return p
	}
	// A failure pauses top-up (topup.FailurePause), then a success
	// forgets it.
	fail(0)
	_, err := s.BeginTopUp(ctx, agent, 1) // settles the failure first
	wantRefused(t, "BeginTopUp(right after a failure)", err, topup.ErrPaused)
	if got := getTopUp(t, s, agent); got.Failures != 1 || got.PendingPaymentID != "" {
		t.Errorf("after one failure = failures %d, pending %q; want 1, none", got.Failures, got.PendingPaymentID)
	}
	clock.Advance(topup.FailurePause - time.Second)
	_, err = s.BeginTopUp(ctx, agent, 1)
	wantRefused(t, "BeginTopUp(a second before the pause ends)", err, topup.ErrPaused)
	clock.Advance(time.Second)
	p := beginTopUp(t, s, agent, 1)
	if _, err := s.CompletePayment(ctx, p.ID, signing); err != nil {
		t.Fatalf("CompletePayment: %v", err)
	}
	if got, err := s.SettleTopUp(ctx, agent); err != nil || got.Failures != 0 {
		t.Errorf("SettleTopUp after a success = failures %d, %v; want 0", got.Failures, err)
	}
	// Three in a row disable top-up; each writes one topup.failed event.
	last := payment.Payment{}
	for seq := int64(2); seq < 5; seq++ {
		last = fail(seq)
		clock.Advance(time.Second)
		if _, err := s.SettleTopUp(ctx, agent); err != nil {
			t.Fatalf("SettleTopUp: %v", err)
		}
		if _, err := s.SettleTopUp(ctx, agent); err != nil { // idempotent
			t.Fatalf("SettleTopUp again: %v", err)
		}
		clock.Advance(time.Hour) // past the pause (doubled after each failure)
	}
	got := getTopUp(t, s, agent)
	if got.Enabled || got.Failures != 3 || got.DisabledReason == "" {
		t.Errorf("GetTopUp after three failures = enabled %v, failures %d, reason %q; want disabled after 3", got.Enabled, got.Failures, got.DisabledReason)
	}
	evs := pendingEventsOf(t, s, event.TopUpFailed)
	if len(evs) != 4 {
		t.Fatalf("topup.failed events = %d, want 4 (one per failure)", len(evs))
	}
	var f topup.Failure
	if err := json.Unmarshal(evs[3].Data, &f); err != nil {
		t.Fatalf("topup.failed data: %v", err)
	}
	want := topup.Failure{AgentID: agent, PaymentID: last.ID, Amount: usd(1000), Reason: "stripe: card_declined", ConsecutiveFailures: 3, Disabled: true}
	if f != want {
		t.Errorf("last topup.failed = %+v, want %+v", f, want)
	}
	if evs[3].AgentID != agent {
		t.Errorf("topup.failed agent = %q, want %q", evs[3].AgentID, agent)
	}
	// Enabling again forgets the failures.
	if again, err := s.PutTopUp(ctx, agent, s0); err != nil || !again.Enabled || again.Failures != 0 {
		t.Errorf("PutTopUp after disable = enabled %v, failures %d, %v; want enabled, 0", again.Enabled, again.Failures, err)
	}
}

func testTopUpList(t *testing.T, s store.EntitlementStore, _ *Clock) {
	ctx := t.Context()
	on := enabledTopUp(t, s)
	off := enabledTopUp(t, s)
	pending := enabledTopUp(t, s)
	beginTopUp(t, s, pending, 0)
	for _, a := range []string{off, pending} {
		if _, err := s.DisableTopUp(ctx, a, "off"); err != nil {
			t.Fatalf("DisableTopUp: %v", err)
		}
	}
	never := newAgent()
	if _, err := s.UpsertAccount(ctx, entitlement.Account{AgentID: never}); err != nil {
		t.Fatalf("UpsertAccount: %v", err)
	}
	items, _ := allPages(t, "ListTopUps", 1, 1000, func(p store.Page) ([]topup.TopUp, string, error) {
		return s.ListTopUps(ctx, p)
	})
	seen := map[string]bool{}
	for _, it := range items {
		if seen[it.AgentID] {
			t.Errorf("ListTopUps listed %s twice", it.AgentID)
		}
		seen[it.AgentID] = true
	}
	want := map[string]bool{on: true, pending: true}
	if diff := cmpDiff(want, seen); diff != "" {
		t.Errorf("ListTopUps (-want +got), want the enabled and the pending one:\n%s", diff)
	}
}

func testTopUpConcurrentBegin(t *testing.T, s store.EntitlementStore, _ *Clock) {
	agent := enabledTopUp(t, s)
	const callers = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	var begun []string
	for range callers {
		wg.Go(func() {
			p, err := s.BeginTopUp(t.Context(), agent, 0)
			switch {
			case err == nil:
				mu.Lock()
				begun = append(begun, p.ID)
				mu.Unlock()
			case store.CodeOf(err) == store.CodeConflict, store.CodeOf(err) == store.CodeUnavailable && !store.IsUncertain(err):
			default:
				t.Errorf("BeginTopUp: %v", err)
			}
		})
	}
	wg.Wait()
	if len(begun) != 1 {
		t.Fatalf("%d concurrent BeginTopUp(seq 0) began %d top-ups, want 1", callers, len(begun))
	}
	if got := getTopUp(t, s, agent); got.Seq != 1 || got.PendingPaymentID != begun[0] {
		t.Errorf("GetTopUp = seq %d, pending %q; want 1, %q", got.Seq, got.PendingPaymentID, begun[0])
	}
}
