package conformance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// testIssuer is the receipt issuer of the payment tests.
const testIssuer = "https://stipend.test"

// signing is the PaymentChange of completions and refunds.
var signing = store.PaymentChange{Issuer: testIssuer, Sign: fakeSign}

// newPayment returns a payment request for a credits grant of cents USD on
// testService. Its fingerprint stands for its parameters, as the API computes it.
func newPayment(agentID, key string, cents int64) payment.Payment {
	return payment.Payment{
		AgentID: agentID, Amount: usd(cents), Provider: payment.ProviderManual,
		ProviderIntentID: "pi_" + key, Description: "top-up",
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: testService}},
		IdempotencyKey: key, Fingerprint: fmt.Sprintf("fp-%s-%d", agentID, cents),
	}
}

func createPayment(t *testing.T, s store.EntitlementStore, p payment.Payment) payment.Payment {
	t.Helper()
	res, err := s.CreatePayment(t.Context(), p)
	if err != nil {
		t.Fatalf("CreatePayment(key %q): %v", p.IdempotencyKey, err)
	}
	if !res.Created {
		t.Fatalf("CreatePayment(key %q): Created false for a new key", p.IdempotencyKey)
	}
	return res.Payment
}

func completePayment(t *testing.T, s store.EntitlementStore, id string) store.Completion {
	t.Helper()
	return must(s.CompletePayment(t.Context(), id, signing))(t, "CompletePayment(%s)", id)
}

func refundPayment(t *testing.T, s store.EntitlementStore, id string) store.Completion {
	t.Helper()
	return must(s.RefundPayment(t.Context(), id, signing))(t, "RefundPayment(%s)", id)
}

// signed returns r with the JWS fakeSign gives it.
func signed(t *testing.T, r receipt.Receipt) receipt.Signed {
	t.Helper()
	jws, err := fakeSign(r)
	if err != nil {
		t.Fatalf("fakeSign: %v", err)
	}
	return receipt.Signed{Receipt: r, JWS: jws}
}

// wantEventTypes fails unless the pending events have exactly these types,
// in any order (events of one change share their OccurredAt, and their order
// among themselves is the backend's). It returns them sorted as want is.
func wantEventTypes(t *testing.T, s store.EntitlementStore, want ...event.Type) []event.Event {
	t.Helper()
	evs := pendingEvents(t, s)
	if d := cmpDiff(want, eventTypes(evs), sortEventTypes); d != "" {
		t.Errorf("pending event types (-want +got):\n%s", d)
		return evs
	}
	rank := func(ty event.Type) int { return slices.Index(want, ty) }
	slices.SortStableFunc(evs, func(a, b event.Event) int { return rank(a.Type) - rank(b.Type) })
	return evs
}

var paymentTests = []subtest{
	{"PaymentCreate", testPaymentCreate},
	{"PaymentCompleteCredits", testPaymentCompleteCredits},
	{"PaymentCompleteQuotaAndSubscription", testPaymentCompleteOtherGrants},
	{"PaymentCompleteTwice", func(t *testing.T, s store.EntitlementStore, clock *Clock) {
		p := createPayment(t, s, newPayment(newAgent(), "k", 500))
		first := completePayment(t, s, p.ID)
		clock.Advance(time.Minute)
		again := completePayment(t, s, p.ID)
		if first.Replayed || !again.Replayed {
			t.Errorf("Replayed = %v then %v, want false then true", first.Replayed, again.Replayed)
		}
		first.Replayed = true
		if d := cmpDiff(first, again); d != "" {
			t.Errorf("second completion differs (-want +got):\n%s", d)
		}
		items, _, err := s.ListEntitlements(t.Context(), p.AgentID, store.EntitlementFilter{}, store.Page{})
		if err != nil || len(items) != 1 {
			t.Errorf("ListEntitlements after two completions = %d, %v; want 1 entitlement", len(items), err)
		}
		wantEventTypes(t, s, event.PaymentSucceeded, event.EntitlementGranted)
	}},
	{"PaymentFail", testPaymentFail},
	{"PaymentRefundAfterPartialUse", testPaymentRefund},
	{"PaymentIllegalTransitions", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		ctx := t.Context()
		p := createPayment(t, s, newPayment(newAgent(), "k", 500))
		_, err := s.RefundPayment(ctx, p.ID, signing)
		wantCode(t, "RefundPayment(pending)", err, store.CodeConflict)
		completePayment(t, s, p.ID)
		_, err = s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "late"})
		wantCode(t, "FailPayment(succeeded)", err, store.CodeConflict)
		if got, err := s.GetPayment(ctx, p.ID); err != nil || got.Status != payment.StatusSucceeded {
			t.Errorf("GetPayment = %s, %v; want %s", got.Status, err, payment.StatusSucceeded)
		}
		_, err = s.CompletePayment(ctx, "no-such-payment", signing)
		wantCode(t, "CompletePayment(unknown)", err, store.CodeNotFound)
		_, err = s.FailPayment(ctx, "no-such-payment", store.PaymentChange{Reason: "x"})
		wantCode(t, "FailPayment(unknown)", err, store.CodeNotFound)
		_, err = s.RefundPayment(ctx, "no-such-payment", signing)
		wantCode(t, "RefundPayment(unknown)", err, store.CodeNotFound)
	}},
	{"PaymentInboundReplay", testPaymentInbound},
	{"ReceiptsList", testReceiptsList},
	{"PaymentCopies", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		ctx := t.Context()
		p := createPayment(t, s, newPayment(newAgent(), "k", 100))
		c := completePayment(t, s, p.ID)
		if len(c.Payment.EntitlementIDs) != 1 || len(c.Receipt.Grants) != 1 || len(c.Entitlements) != 1 {
			t.Fatalf("CompletePayment = %+v, want one entitlement ID, grant and entitlement", c)
		}
		c.Payment.EntitlementIDs[0] = "changed"
		c.Receipt.Grants[0].EntitlementID = "changed"
		c.Entitlements[0].ID = "changed"
		got, err := s.GetPayment(ctx, p.ID)
		if err != nil || got.EntitlementIDs[0] == "changed" {
			t.Errorf("GetPayment after changing a returned copy: %v, entitlementIds %v", err, got.EntitlementIDs)
		}
		r, err := s.GetReceipt(ctx, c.Receipt.ID)
		if err != nil || r.Grants[0].EntitlementID == "changed" {
			t.Errorf("GetReceipt after changing a returned copy: %v, grants %+v", err, r.Grants)
		}
		r.Grants[0].EntitlementID = "changed"
		again, err := s.GetReceipt(ctx, c.Receipt.ID)
		if err != nil || again.Grants[0].EntitlementID == "changed" {
			t.Errorf("GetReceipt after changing a returned receipt: %v, grants %+v", err, again.Grants)
		}
	}},
}

func testPaymentCreate(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	req := newPayment(agent, "pay-1", 1500)
	res, err := s.CreatePayment(ctx, req)
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	want := req
	want.ID, want.Status, want.CreatedAt, want.UpdatedAt = res.Payment.ID, payment.StatusPending, clock.Now(), clock.Now()
	if !res.Created || res.Payment.ID == "" {
		t.Errorf("CreatePayment: Created %v, ID %q; want true and an ID", res.Created, res.Payment.ID)
	}
	if d := cmpDiff(want, res.Payment); d != "" {
		t.Errorf("CreatePayment mismatch (-want +got):\n%s", d)
	}
	clock.Advance(time.Minute)
	again, err := s.CreatePayment(ctx, req)
	if err != nil || again.Created {
		t.Errorf("CreatePayment (same key and parameters) = Created %v, %v; want false, nil", again.Created, err)
	}
	if d := cmpDiff(want, again.Payment); d != "" {
		t.Errorf("CreatePayment (same key) mismatch (-want +got):\n%s", d)
	}
	other := newPayment(agent, "pay-1", 1600)
	_, err = s.CreatePayment(ctx, other)
	wantCode(t, "CreatePayment(same key, other parameters)", err, store.CodeConflict)

	got, err := s.GetPayment(ctx, want.ID)
	if d := cmpDiff(want, got); err != nil || d != "" {
		t.Errorf("GetPayment: %v, mismatch (-want +got):\n%s", err, d)
	}
	got, err = s.FindPaymentByIdempotencyKey(ctx, "pay-1")
	if d := cmpDiff(want, got); err != nil || d != "" {
		t.Errorf("FindPaymentByIdempotencyKey: %v, mismatch (-want +got):\n%s", err, d)
	}
	got, err = s.FindPaymentByProviderIntentID(ctx, "pi_pay-1")
	if d := cmpDiff(want, got); err != nil || d != "" {
		t.Errorf("FindPaymentByProviderIntentID: %v, mismatch (-want +got):\n%s", err, d)
	}
	_, err = s.GetPayment(ctx, "no-such-payment")
	wantCode(t, "GetPayment(unknown)", err, store.CodeNotFound)
	_, err = s.FindPaymentByIdempotencyKey(ctx, "no-such-key")
	wantCode(t, "FindPaymentByIdempotencyKey(unknown)", err, store.CodeNotFound)
	_, err = s.FindPaymentByProviderIntentID(ctx, "pi_unknown")
	wantCode(t, "FindPaymentByProviderIntentID(unknown)", err, store.CodeNotFound)
	if evs := pendingEvents(t, s); len(evs) != 0 {
		t.Errorf("CreatePayment wrote events %v, want none", eventTypes(evs))
	}
}

func testPaymentCompleteCredits(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	p := createPayment(t, s, newPayment(agent, "k", 1500))
	now := clock.Advance(time.Minute)
	c := completePayment(t, s, p.ID)
	if c.Replayed || len(c.Entitlements) != 1 {
		t.Fatalf("CompletePayment: Replayed %v with %d entitlements, want false and 1", c.Replayed, len(c.Entitlements))
	}
	wantE := p.Grant.Entitlement(c.Entitlements[0].ID, &p, now)
	if d := cmpDiff(wantE, c.Entitlements[0]); d != "" {
		t.Errorf("granted entitlement mismatch (-want +got):\n%s", d)
	}
	if wantE.Credits.Balance != usd(1500) {
		t.Errorf("granted balance = %v, want the amount 1500 USD", wantE.Credits.Balance)
	}
	wantR := signed(t, receipt.Receipt{
		ID: c.Receipt.ID, Version: receipt.Version, Kind: receipt.KindPayment, Issuer: testIssuer,
		AgentID: agent, PaymentID: p.ID, Amount: usd(1500), Grants: []receipt.Grant{receipt.GrantOf(&wantE)}, IssuedAt: now,
	})
	if d := cmpDiff(wantR, c.Receipt); d != "" || c.Receipt.ID == "" {
		t.Errorf("receipt mismatch (-want +got):\n%s", d)
	}
	wantP := p
	wantP.Status, wantP.UpdatedAt, wantP.SucceededAt = payment.StatusSucceeded, now, &now
	wantP.ReceiptID, wantP.EntitlementIDs = c.Receipt.ID, []string{wantE.ID}
	if d := cmpDiff(wantP, c.Payment); d != "" {
		t.Errorf("completed payment mismatch (-want +got):\n%s", d)
	}
	if got, err := s.GetPayment(ctx, p.ID); err != nil || cmpDiff(wantP, got) != "" {
		t.Errorf("GetPayment after completion: %v, mismatch:\n%s", err, cmpDiff(wantP, got))
	}
	if got, err := s.GetReceipt(ctx, wantR.ID); err != nil || cmpDiff(wantR, got) != "" {
		t.Errorf("GetReceipt: %v, mismatch:\n%s", err, cmpDiff(wantR, got))
	}
	if d := cmpDiff(wantE, getEntitlement(t, s, wantE.ID)); d != "" {
		t.Errorf("GetEntitlement(granted) mismatch (-want +got):\n%s", d)
	}
	evs := wantEventTypes(t, s, event.PaymentSucceeded, event.EntitlementGranted)
	if len(evs) == 2 {
		if got := eventData(t, evs[0])["id"]; got != p.ID {
			t.Errorf("payment.succeeded data id = %v, want %s", got, p.ID)
		}
		if got := eventData(t, evs[1])["id"]; got != wantE.ID {
			t.Errorf("entitlement.granted data id = %v, want %s", got, wantE.ID)
		}
	}
	if _, err := s.GetAccount(ctx, agent); err != nil {
		t.Errorf("GetAccount of the paying agent: %v", err)
	}
	mustConsume(t, s, request(agent, "use", 100))
}

func testPaymentCompleteOtherGrants(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent := newAgent()
	until := clock.Now().Add(30 * 24 * time.Hour)
	grants := map[string]payment.Grant{
		"quota": {Type: entitlement.TypeQuota, Scope: entitlement.Scope{Service: testService, Tools: []string{testTool}},
			Limit: 100, Period: entitlement.PeriodMonth, ExpiresAt: ptr(clock.Now().Add(365 * 24 * time.Hour))},
		"subscription": {Type: entitlement.TypeSubscription, Scope: entitlement.Scope{Service: entitlement.AnyService}, ValidUntil: &until},
	}
	for name, g := range grants {
		req := newPayment(agent, name, 900)
		req.Grant = g
		p := createPayment(t, s, req)
		c := completePayment(t, s, p.ID)
		if len(c.Entitlements) != 1 {
			t.Errorf("CompletePayment(%s): %d entitlements, want 1", name, len(c.Entitlements))
			continue
		}
		want := g.Entitlement(c.Entitlements[0].ID, &p, clock.Now())
		if d := cmpDiff(want, c.Entitlements[0]); d != "" {
			t.Errorf("CompletePayment(%s) entitlement mismatch (-want +got):\n%s", name, d)
		}
		if d := cmpDiff([]receipt.Grant{receipt.GrantOf(&want)}, c.Receipt.Grants); d != "" {
			t.Errorf("CompletePayment(%s) receipt grants mismatch (-want +got):\n%s", name, d)
		}
	}
}

func testPaymentFail(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	p := createPayment(t, s, newPayment(newAgent(), "k", 500))
	now := clock.Advance(time.Minute)
	got, err := s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "card_declined"})
	if err != nil {
		t.Fatalf("FailPayment: %v", err)
	}
	want := p
	want.Status, want.FailureReason, want.FailedAt, want.UpdatedAt = payment.StatusFailed, "card_declined", &now, now
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("FailPayment mismatch (-want +got):\n%s", d)
	}
	clock.Advance(time.Minute)
	again, err := s.FailPayment(ctx, p.ID, store.PaymentChange{Reason: "other"})
	if d := cmpDiff(want, again); err != nil || d != "" {
		t.Errorf("FailPayment (again): %v, mismatch (-want +got):\n%s", err, d)
	}
	_, err = s.CompletePayment(ctx, p.ID, signing)
	wantCode(t, "CompletePayment(failed)", err, store.CodeConflict)
	_, err = s.RefundPayment(ctx, p.ID, signing)
	wantCode(t, "RefundPayment(failed)", err, store.CodeConflict)
	evs := wantEventTypes(t, s, event.PaymentFailed)
	if len(evs) == 1 {
		if got := eventData(t, evs[0])["id"]; got != p.ID {
			t.Errorf("payment.failed data id = %v, want %s", got, p.ID)
		}
	}
	items, _, err := s.ListEntitlements(ctx, p.AgentID, store.EntitlementFilter{}, store.Page{})
	if err != nil || len(items) != 0 {
		t.Errorf("a failed payment granted %d entitlements (%v), want none", len(items), err)
	}
}

func testPaymentRefund(t *testing.T, s store.EntitlementStore, clock *Clock) {
	agent := newAgent()
	p := createPayment(t, s, newPayment(agent, "k", 1000))
	done := completePayment(t, s, p.ID)
	ent := done.Entitlements[0]
	mustConsume(t, s, request(agent, "use-1", 300))
	now := clock.Advance(time.Hour)
	c := refundPayment(t, s, p.ID)
	if c.Replayed {
		t.Errorf("RefundPayment: Replayed true on the first refund")
	}
	left := ent
	left.Credits.Balance = usd(700)
	wantR := signed(t, receipt.Receipt{
		ID: c.Receipt.ID, Version: receipt.Version, Kind: receipt.KindRefund, Issuer: testIssuer,
		AgentID: agent, PaymentID: p.ID, Amount: usd(1000), Grants: []receipt.Grant{receipt.GrantOf(&left)}, IssuedAt: now,
	})
	if d := cmpDiff(wantR, c.Receipt); d != "" || c.Receipt.ID == "" || c.Receipt.ID == done.Receipt.ID {
		t.Errorf("refund receipt mismatch (-want +got):\n%s", d)
	}
	revoked := left
	revoked.Status, revoked.RevokedAt = entitlement.StatusRevoked, &now
	if d := cmpDiff([]entitlement.Entitlement{revoked}, c.Entitlements); d != "" {
		t.Errorf("refund entitlements mismatch (-want +got):\n%s", d)
	}
	if d := cmpDiff(revoked, getEntitlement(t, s, ent.ID)); d != "" {
		t.Errorf("GetEntitlement after refund (-want +got):\n%s", d)
	}
	if c.Payment.Status != payment.StatusRefunded || c.Payment.RefundReceiptID != c.Receipt.ID ||
		c.Payment.RefundedAt == nil || !c.Payment.RefundedAt.Equal(now) || c.Payment.ReceiptID != done.Receipt.ID {
		t.Errorf("refunded payment = %+v, want refunded at %v with both receipt IDs", c.Payment, now)
	}
	wantDenied(t, s, request(agent, "use-2", 1), entitlement.Denial{Reason: entitlement.ReasonNotFound})

	evs := pendingEvents(t, s)
	if d := cmpDiff([]event.Type{event.PaymentSucceeded, event.EntitlementGranted, event.PaymentRefunded, event.EntitlementRevoked},
		eventTypes(evs), sortEventTypes); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}

	clock.Advance(time.Hour)
	again := refundPayment(t, s, p.ID)
	if !again.Replayed || cmpDiff(c.Receipt, again.Receipt) != "" {
		t.Errorf("RefundPayment (again): Replayed %v, receipt diff:\n%s", again.Replayed, cmpDiff(c.Receipt, again.Receipt))
	}
	completed := completePayment(t, s, p.ID)
	if !completed.Replayed || cmpDiff(done.Receipt, completed.Receipt) != "" {
		t.Errorf("CompletePayment(refunded): Replayed %v, receipt diff (want the payment receipt):\n%s", completed.Replayed, cmpDiff(done.Receipt, completed.Receipt))
	}
	if n := len(pendingEvents(t, s)); n != len(evs) {
		t.Errorf("replays wrote %d more events", n-len(evs))
	}
}

func testPaymentInbound(t *testing.T, s store.EntitlementStore, _ *Clock) {
	ctx := t.Context()
	agent := newAgent()
	a := createPayment(t, s, newPayment(agent, "a", 100))
	b := createPayment(t, s, newPayment(agent, "b", 200))
	in := &store.InboundEvent{Source: "stripe", EventID: "evt_1"}
	withInbound := signing
	withInbound.Inbound = in
	c, err := s.CompletePayment(ctx, a.ID, withInbound)
	if err != nil || c.Replayed || c.Payment.Status != payment.StatusSucceeded {
		t.Fatalf("CompletePayment(a, evt_1) = %s replayed %v, %v; want succeeded", c.Payment.Status, c.Replayed, err)
	}
	before := pendingEvents(t, s)

	// The same provider event again, even for another change, changes nothing.
	got, err := s.FailPayment(ctx, b.ID, store.PaymentChange{Reason: "x", Inbound: in})
	if err != nil || got.Status != payment.StatusPending {
		t.Errorf("FailPayment(b, evt_1 again) = %s, %v; want b unchanged (pending)", got.Status, err)
	}
	r, err := s.RefundPayment(ctx, a.ID, withInbound)
	if err != nil || !r.Replayed || r.Payment.Status != payment.StatusSucceeded {
		t.Errorf("RefundPayment(a, evt_1 again) = %s replayed %v, %v; want a unchanged (succeeded), replayed", r.Payment.Status, r.Replayed, err)
	}
	again, err := s.CompletePayment(ctx, a.ID, withInbound)
	if err != nil || !again.Replayed || cmpDiff(c.Receipt, again.Receipt) != "" {
		t.Errorf("CompletePayment(a, evt_1 again): replayed %v, %v, receipt diff:\n%s", again.Replayed, err, cmpDiff(c.Receipt, again.Receipt))
	}
	if got, err := s.GetPayment(ctx, b.ID); err != nil || got.Status != payment.StatusPending {
		t.Errorf("GetPayment(b) = %s, %v; want pending", got.Status, err)
	}
	if d := cmpDiff(before, pendingEvents(t, s)); d != "" {
		t.Errorf("events changed by replayed inbound events (-want +got):\n%s", d)
	}

	// A new provider event goes through.
	got, err = s.FailPayment(ctx, b.ID, store.PaymentChange{Reason: "x", Inbound: &store.InboundEvent{Source: "stripe", EventID: "evt_2"}})
	if err != nil || got.Status != payment.StatusFailed {
		t.Errorf("FailPayment(b, evt_2) = %s, %v; want failed", got.Status, err)
	}
}

func testReceiptsList(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	var want []receipt.Signed
	for i := range 3 {
		p := createPayment(t, s, newPayment(agent, fmt.Sprint("k", i), int64(100*(i+1))))
		want = append(want, completePayment(t, s, p.ID).Receipt)
		clock.Advance(time.Second)
	}
	other := createPayment(t, s, newPayment(newAgent(), "other", 100))
	completePayment(t, s, other.ID)
	got, _ := allPages(t, "ListReceipts", 2, 10, func(p store.Page) ([]receipt.Signed, string, error) {
		return s.ListReceipts(ctx, agent, p)
	})
	if d := cmpDiff(want, got); d != "" {
		t.Errorf("ListReceipts over pages of 2 (-want +got):\n%s", d)
	}
	_, _, err := s.ListReceipts(ctx, agent, store.Page{Cursor: "~~~"})
	wantCode(t, "ListReceipts(bad cursor)", err, store.CodeInvalid)
	_, err = s.GetReceipt(ctx, "no-such-receipt")
	wantCode(t, "GetReceipt(unknown)", err, store.CodeNotFound)
}
