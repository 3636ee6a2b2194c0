package firestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// TestStore_PaymentChangesContend: concurrent changes of one payment that
// are not the same call (refunds with other reasons, as requests with other
// Idempotency-Keys are; completions racing failures), each with the 2 s
// deadline of `stipend serve --store-timeout`, on one instance. Every
// caller must get an answer it can act on (done, replayed, or a conflict
// saying the payment moved on), not an uncertain 503 (issue 29, item 1:
// they once all timed out, the change applied behind them), and the
// payment ends in one state.
func TestStore_PaymentChangesContend(t *testing.T) {
	newPayment := func(t *testing.T, s store.EntitlementStore, key string) string {
		t.Helper()
		res, err := s.CreatePayment(t.Context(), payment.Payment{
			AgentID: "agent-contend", Amount: usd(500), Provider: payment.ProviderManual,
			Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
			IdempotencyKey: key, Fingerprint: "fp-" + key,
		})
		if err != nil {
			t.Fatalf("CreatePayment: %v", err)
		}
		return res.Payment.ID
	}
	deadline := func() (context.Context, context.CancelFunc) {
		return context.WithTimeout(context.Background(), 2*time.Second)
	}
	acted := func(err error) bool { return err == nil || store.CodeOf(err) == store.CodeConflict }

	t.Run("Refunds", func(t *testing.T) {
		s := instances(t, 1)[0]
		id := newPayment(t, s, "refunds")
		if _, err := s.CompletePayment(t.Context(), id, completion); err != nil {
			t.Fatalf("CompletePayment: %v", err)
		}
		const n = 8
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				ctx, cancel := deadline()
				defer cancel()
				ch := completion
				ch.Reason = fmt.Sprint("refund-", i)
				_, errs[i] = s.RefundPayment(ctx, id, ch)
			})
		}
		wg.Wait()
		for i, err := range errs {
			if !acted(err) {
				t.Errorf("refund %d: %v, want an answer (done or conflict)", i, err)
			}
		}
		if p, err := s.GetPayment(t.Context(), id); err != nil || p.Status != payment.StatusRefunded {
			t.Errorf("payment %v (%v), want refunded", p.Status, err)
		}
	})
	t.Run("SucceedFail", func(t *testing.T) {
		s := instances(t, 1)[0]
		id := newPayment(t, s, "succeed-fail")
		const n = 10
		errs := make([]error, 2*n)
		var wg sync.WaitGroup
		for i := range 2 * n {
			wg.Go(func() {
				ctx, cancel := deadline()
				defer cancel()
				ch := completion
				ch.Reason = fmt.Sprint("call-", i)
				if i%2 == 0 {
					_, errs[i] = s.CompletePayment(ctx, id, ch)
				} else {
					_, errs[i] = s.FailPayment(ctx, id, ch)
				}
			})
		}
		wg.Wait()
		for i, err := range errs {
			if !acted(err) {
				t.Errorf("call %d: %v, want an answer (done or conflict)", i, err)
			}
		}
		if p, err := s.GetPayment(t.Context(), id); err != nil || p.Status == payment.StatusPending {
			t.Errorf("payment %v (%v), want succeeded or failed", p.Status, err)
		}
	})
}
