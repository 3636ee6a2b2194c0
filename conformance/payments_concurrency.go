package conformance

import (
	"sync"
	"testing"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// paymentCallers is how many concurrent calls the payment races make.
const paymentCallers = 20

// together runs f(0..n-1) on n goroutines released at once, and waits.
func together(n int, f func(i int)) {
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for i := range n {
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			f(i)
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
}

var paymentConcurrencyTests = []subtest{
	{"PaymentConcurrentCreate", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		req := newPayment(newAgent(), "one-key", 700)
		results := make([]store.CreatePaymentResult, paymentCallers)
		errs := make([]error, paymentCallers)
		together(paymentCallers, func(i int) { results[i], errs[i] = s.CreatePayment(t.Context(), req) })
		created := 0
		for i, r := range results {
			if errs[i] != nil {
				t.Errorf("CreatePayment #%d: %v", i, errs[i])
				continue
			}
			if r.Created {
				created++
			}
			if r.Payment.ID != results[0].Payment.ID {
				t.Errorf("CreatePayment #%d returned payment %s, #0 returned %s: want one payment", i, r.Payment.ID, results[0].Payment.ID)
			}
		}
		if created != 1 {
			t.Errorf("%d concurrent CreatePayment with one key: %d report Created, want 1", paymentCallers, created)
		}
	}},
	{"PaymentConcurrentComplete", func(t *testing.T, s store.EntitlementStore, _ *Clock) {
		p := createPayment(t, s, newPayment(newAgent(), "k", 700))
		results := make([]store.Completion, paymentCallers)
		errs := make([]error, paymentCallers)
		together(paymentCallers, func(i int) { results[i], errs[i] = s.CompletePayment(t.Context(), p.ID, signing) })
		fresh := 0
		for i, c := range results {
			if errs[i] != nil {
				t.Errorf("CompletePayment #%d: %v", i, errs[i])
				continue
			}
			if !c.Replayed {
				fresh++
			}
			if c.Receipt.ID == "" || c.Receipt.ID != results[0].Receipt.ID || len(c.Entitlements) != 1 ||
				c.Entitlements[0].ID != results[0].Entitlements[0].ID {
				t.Errorf("CompletePayment #%d: receipt %q, %d entitlements; want the receipt and entitlement of #0", i, c.Receipt.ID, len(c.Entitlements))
			}
		}
		if fresh != 1 {
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
