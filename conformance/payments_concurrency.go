package conformance

import (
	"testing"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// paymentCallers is how many concurrent calls the payment races make.
const paymentCallers = 20

// paymentConcurrencyTests: the payment races of RunConcurrencyTests.
var paymentConcurrencyTests = []subtest{
	{"PaymentConcurrentCreate", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		req := newPayment(newAgent(), "one-key", 700)
		results := make([]store.CreatePaymentResult, paymentCallers)
		errs := make([]error, paymentCallers)
		create := func(i int) { results[i], errs[i] = s.CreatePayment(t.Context(), req) }
		together(paymentCallers, create)
		retried := failures(errs)
		retryUnavailable(t, "CreatePayment", errs, create)
		ref := results[firstOK(t, errs)]
		created := 0
		for i, r := range results {
			if errs[i] != nil {
				continue // reported by retryUnavailable
			}
			if r.Created {
				created++
			}
			if r.Payment.ID != ref.Payment.ID {
				t.Errorf("CreatePayment #%d returned payment %s, another returned %s: want one payment", i, r.Payment.ID, ref.Payment.ID)
			}
		}
		// Exactly one reports Created, unless a call had to be retried: the
		// winner's answer may be the one that was lost.
		if created > 1 || (created == 0 && retried == 0) {
			t.Errorf("%d concurrent CreatePayment with one key: %d report Created, want 1", paymentCallers, created)
		}
		if got, err := s.FindPaymentByIdempotencyKey(t.Context(), req.IdempotencyKey); err != nil || got.ID != ref.Payment.ID {
			t.Errorf("FindPaymentByIdempotencyKey = %s, %v; want the one payment %s", got.ID, err, ref.Payment.ID)
		}
	}},
	{"PaymentConcurrentComplete", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		p := createPayment(t, s, newPayment(newAgent(), "k", 700))
		results := make([]store.Completion, paymentCallers)
		errs := make([]error, paymentCallers)
		complete := func(i int) { results[i], errs[i] = s.CompletePayment(t.Context(), p.ID, signing) }
		together(paymentCallers, complete)
		retried := failures(errs)
		retryUnavailable(t, "CompletePayment", errs, complete)
		ref := results[firstOK(t, errs)]
		if len(ref.Entitlements) != 1 || ref.Receipt.ID == "" {
			t.Fatalf("CompletePayment: receipt %q, %d entitlements; want a receipt and one entitlement", ref.Receipt.ID, len(ref.Entitlements))
		}
		fresh := 0
		for i, c := range results {
			if errs[i] != nil {
				continue // reported by retryUnavailable
			}
			if !c.Replayed {
				fresh++
			}
			if c.Receipt.ID != ref.Receipt.ID || len(c.Entitlements) != 1 || c.Entitlements[0].ID != ref.Entitlements[0].ID {
				t.Errorf("CompletePayment #%d: receipt %q, %d entitlements; want receipt %s and entitlement %s like the others", i, c.Receipt.ID, len(c.Entitlements), ref.Receipt.ID, ref.Entitlements[0].ID)
			}
		}
		if fresh > 1 || (fresh == 0 && retried == 0) {
			t.Errorf("%d concurrent CompletePayment: %d not replayed, want 1", paymentCallers, fresh)
		}
		items, _, err := s.ListEntitlements(t.Context(), p.AgentID, store.EntitlementFilter{}, store.Page{})
		if err != nil || len(items) != 1 {
			t.Errorf("ListEntitlements = %d, %v; want one grant", len(items), err)
		}
		receipts, _, err := s.ListReceipts(t.Context(), p.AgentID, store.Page{})
		if err != nil || len(receipts) != 1 {
			t.Errorf("ListReceipts = %d, %v; want one receipt", len(receipts), err)
		}
		wantEventTypes(t, s, event.PaymentSucceeded, event.EntitlementGranted)
	}},
}
