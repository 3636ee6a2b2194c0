package conformance

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// providerPaymentTests are the contract of store.ProviderPayments: a
// payment's Checkout stored as given, linking a payment to its provider
// intent, and the pending payments a reconciliation sweep reads.
var providerPaymentTests = []subtest{
	{"PaymentCheckoutStored", testPaymentCheckoutStored},
	{"PaymentLinkProviderIntent", testPaymentLinkProviderIntent},
	{"PaymentListPending", testPaymentListPending},
}

// stripePayment is newPayment for provider stripe with no intent, as a
// payment made through Checkout is created.
func stripePayment(agentID, key string, cents int64) payment.Payment {
	p := newPayment(agentID, key, cents)
	p.Provider, p.ProviderIntentID = payment.ProviderStripe, ""
	return p
}

func testPaymentCheckoutStored(t *testing.T, s store.EntitlementStore, clock *Clock) {
	p := stripePayment(newAgent(), "co", 1500)
	expires := clock.Now().Add(24 * time.Hour).In(time.FixedZone("x", 3600))
	p.Checkout = &payment.Checkout{SessionID: "cs_test_1", URL: "https://checkout.stripe.com/c/pay/cs_test_1", ExpiresAt: expires}
	created := createPayment(t, s, p)
	got, err := s.GetPayment(t.Context(), created.ID)
	if err != nil {
		t.Fatalf("GetPayment: %v", err)
	}
	want := &payment.Checkout{SessionID: "cs_test_1", URL: p.Checkout.URL, ExpiresAt: expires.UTC()}
	if diff := cmp.Diff(want, got.Checkout); diff != "" {
		t.Errorf("GetPayment(...).Checkout (-want +got):\n%s", diff)
	}
	if got.Checkout.ExpiresAt.Location() != time.UTC {
		t.Errorf("Checkout.ExpiresAt in %v, want UTC", got.Checkout.ExpiresAt.Location())
	}
	if diff := cmp.Diff(want, created.Checkout); diff != "" {
		t.Errorf("CreatePayment(...).Checkout (-want +got):\n%s", diff)
	}
	p.Checkout.SessionID = ""
	p.IdempotencyKey = "co-2"
	_, err = s.CreatePayment(t.Context(), p)
	wantCode(t, "CreatePayment(checkout without a session)", err, store.CodeInvalid)
}

func testPaymentLinkProviderIntent(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	p := createPayment(t, s, stripePayment(agent, "link", 1500))
	other := createPayment(t, s, newPayment(agent, "linked", 700)) // linked to pi_linked
	clock.Advance(time.Second)

	linked, err := s.LinkProviderIntent(ctx, p.ID, "pi_checkout")
	if err != nil {
		t.Fatalf("LinkProviderIntent: %v", err)
	}
	if linked.ProviderIntentID != "pi_checkout" || linked.Status != payment.StatusPending || !linked.UpdatedAt.Equal(clock.Now()) {
		t.Errorf("LinkProviderIntent = intent %q, status %s, updatedAt %v; want pi_checkout, pending, %v",
			linked.ProviderIntentID, linked.Status, linked.UpdatedAt, clock.Now())
	}
	found, err := s.FindPaymentByProviderIntentID(ctx, "pi_checkout")
	if err != nil || found.ID != p.ID {
		t.Fatalf("FindPaymentByProviderIntentID(pi_checkout) = %q, %v; want %q", found.ID, err, p.ID)
	}
	clock.Advance(time.Second)
	again, err := s.LinkProviderIntent(ctx, p.ID, "pi_checkout")
	if err != nil {
		t.Fatalf("LinkProviderIntent again: %v", err)
	}
	if diff := cmp.Diff(linked, again); diff != "" {
		t.Errorf("LinkProviderIntent again changed the payment (-first +again):\n%s", diff)
	}
	_, err = s.LinkProviderIntent(ctx, p.ID, "pi_other")
	wantCode(t, "LinkProviderIntent(another intent)", err, store.CodeConflict)
	fresh := createPayment(t, s, stripePayment(agent, "fresh", 900))
	_, err = s.LinkProviderIntent(ctx, fresh.ID, other.ProviderIntentID)
	wantCode(t, "LinkProviderIntent(an intent of another payment)", err, store.CodeConflict)
	_, err = s.LinkProviderIntent(ctx, fresh.ID, "")
	wantCode(t, "LinkProviderIntent(empty intent)", err, store.CodeInvalid)
	_, err = s.LinkProviderIntent(ctx, "no-such-payment", "pi_x")
	wantCode(t, "LinkProviderIntent(unknown payment)", err, store.CodeNotFound)
	if got, err := s.GetPayment(ctx, fresh.ID); err != nil || got.ProviderIntentID != "" {
		t.Errorf("GetPayment(refused link) = intent %q, %v; want none", got.ProviderIntentID, err)
	}
}

func testPaymentListPending(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	agent := newAgent()
	var want []string
	for i, key := range []string{"p1", "p2", "p3"} {
		p := createPayment(t, s, stripePayment(agent, key, int64(100+i)))
		want = append(want, p.ID)
		clock.Advance(time.Minute)
	}
	done := createPayment(t, s, stripePayment(agent, "done", 500))
	completePayment(t, s, done.ID)
	failed := createPayment(t, s, stripePayment(agent, "failed", 500))
	if _, err := s.FailPayment(ctx, failed.ID, store.PaymentChange{Reason: "declined"}); err != nil {
		t.Fatalf("FailPayment: %v", err)
	}
	createPayment(t, s, newPayment(agent, "manual", 500)) // another provider
	cutoff := clock.Now()
	clock.Advance(time.Minute)
	createPayment(t, s, stripePayment(agent, "young", 500)) // after the cutoff

	f := store.PendingFilter{Provider: payment.ProviderStripe, CreatedBefore: cutoff}
	pending, _ := allPages(t, "ListPendingPayments", 2, 5, func(p store.Page) ([]payment.Payment, string, error) {
		return s.ListPendingPayments(ctx, f, p)
	})
	var got []string
	for _, p := range pending {
		if p.Status != payment.StatusPending {
			t.Errorf("ListPendingPayments: payment %s is %s", p.ID, p.Status)
		}
		got = append(got, p.ID)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListPendingPayments ids (-want +got):\n%s", diff)
	}
	items, _, err := s.ListPendingPayments(ctx, store.PendingFilter{Provider: payment.ProviderManual, CreatedBefore: cutoff}, store.Page{})
	if err != nil || len(items) != 1 || items[0].Provider != payment.ProviderManual {
		t.Errorf("ListPendingPayments(manual) = %d payments, %v; want the one manual payment", len(items), err)
	}
	_, _, err = s.ListPendingPayments(ctx, store.PendingFilter{Provider: payment.ProviderStripe}, store.Page{})
	wantCode(t, "ListPendingPayments(no createdBefore)", err, store.CodeInvalid)
	_, _, err = s.ListPendingPayments(ctx, store.PendingFilter{Provider: "paypal", CreatedBefore: cutoff}, store.Page{})
	wantCode(t, "ListPendingPayments(unknown provider)", err, store.CodeInvalid)
	_, _, err = s.ListPendingPayments(ctx, f, store.Page{Cursor: "garbage"})
	wantCode(t, "ListPendingPayments(bad cursor)", err, store.CodeInvalid)
}
