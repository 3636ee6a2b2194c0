package stripepay_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"testing"
	"time"

	stripewebhook "github.com/stripe/stripe-go/v82/webhook"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/stripepay"
	"github.com/stipend-mcp/stipend/webhook"
)

func pureSign(r receipt.Receipt) (string, error) {
	sum := sha256.Sum256([]byte(r.ID + r.PaymentID))
	return "test." + hex.EncodeToString(sum[:]), nil
}

// sweepEnv is a memory store, a clock, and payments whose Stripe objects
// stripe-mock made.
type sweepEnv struct {
	store *memory.Store
	clock *conformance.Clock
	mock  string
}

func newSweepEnv(t *testing.T) *sweepEnv {
	clock := conformance.NewClock()
	return &sweepEnv{store: memory.New(memory.WithClock(clock.Now)), clock: clock, mock: stripemock.URL(t)}
}

func (e *sweepEnv) applier() *stripepay.Applier {
	return &stripepay.Applier{Payments: e.store, Issuer: "https://stipend.test", Sign: pureSign, Logger: slog.New(slog.DiscardHandler)}
}

// sweep runs one sweep reading Stripe at base.
func (e *sweepEnv) sweep(t *testing.T, base string) stripepay.Report {
	t.Helper()
	s := &stripepay.Sweep{Store: e.store, Stripe: stripemock.Client(t, base), Applier: e.applier(), Now: e.clock.Now,
		Logger: slog.New(slog.DiscardHandler)}
	r, err := s.Once(t.Context())
	if err != nil {
		t.Fatalf("Sweep.Once: %v", err)
	}
	return r
}

func newPayment(key string) payment.Payment {
	return payment.Payment{
		ID: stripepay.PaymentID(key), AgentID: "agent-1", Amount: money.Money{Cents: 1500, Currency: "USD"}, Provider: payment.ProviderStripe,
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey: key, Fingerprint: "fp-" + key,
	}
}

// intentPayment makes a PaymentIntent at stripe-mock and its payment, as
// POST /v1/payments does.
func (e *sweepEnv) intentPayment(t *testing.T, key string) payment.Payment {
	t.Helper()
	p := newPayment(key)
	pi, err := stripemock.Client(t, e.mock).CreatePaymentIntent(t.Context(), &p, key)
	if err != nil {
		t.Fatalf("CreatePaymentIntent: %v", err)
	}
	p.ProviderIntentID = pi.ID
	return e.create(t, p)
}

// paidLater makes an intent payment (intentPayment) old enough for the
// sweep to read, and a Stripe that answers its intent succeeded.
func (e *sweepEnv) paidLater(t *testing.T, key string) (p payment.Payment, succeeded string) {
	t.Helper()
	p = e.intentPayment(t, key)
	e.clock.Advance(stripepay.DefaultSweepAge + time.Second)
	return p, stripemock.Patched(t, e.mock, map[string]any{"status": "succeeded", "amount_received": 1500, "currency": "usd"})
}

// checkoutPayment makes a Checkout Session at stripe-mock and its payment,
// as POST /v1/checkout-sessions does.
func (e *sweepEnv) checkoutPayment(t *testing.T, key string) payment.Payment {
	t.Helper()
	p := newPayment(key)
	cs, err := stripemock.Client(t, e.mock).CreateCheckoutSession(t.Context(), &p, stripepay.CheckoutRequest{SuccessURL: "https://app.example/ok"}, key)
	if err != nil {
		t.Fatalf("CreateCheckoutSession: %v", err)
	}
	p.Checkout = &payment.Checkout{SessionID: cs.ID, URL: cs.URL, ExpiresAt: time.Unix(cs.ExpiresAt, 0)}
	return e.create(t, p)
}

func (e *sweepEnv) create(t *testing.T, p payment.Payment) payment.Payment {
	t.Helper()
	res, err := e.store.CreatePayment(t.Context(), p)
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	return res.Payment
}

func (e *sweepEnv) get(t *testing.T, id string) payment.Payment {
	t.Helper()
	p, err := e.store.GetPayment(t.Context(), id)
	if err != nil {
		t.Fatalf("GetPayment: %v", err)
	}
	return p
}

func (e *sweepEnv) receipts(t *testing.T) int {
	t.Helper()
	rs, _, err := e.store.ListReceipts(t.Context(), "agent-1", store.Page{})
	if err != nil {
		t.Fatalf("ListReceipts: %v", err)
	}
	return len(rs)
}

// TestSweep_InProgress: stripe-mock's fixtures are an intent waiting for a
// payment method and an open session: the sweep reads both and leaves the
// payments pending; a payment younger than the sweep's age is not read.
func TestSweep_InProgress(t *testing.T) {
	e := newSweepEnv(t)
	pi := e.intentPayment(t, "sweep-pi")
	cs := e.checkoutPayment(t, "sweep-cs")
	if r := e.sweep(t, e.mock); r.Checked != 0 {
		t.Errorf("sweep of young payments: %v, want none checked", r)
	}
	e.clock.Advance(stripepay.DefaultSweepAge + time.Second)
	if r := e.sweep(t, e.mock); r != (stripepay.Report{Checked: 2}) {
		t.Errorf("sweep: %v, want 2 checked, none applied or failed", r)
	}
	for _, id := range []string{pi.ID, cs.ID} {
		if got := e.get(t, id); got.Status != payment.StatusPending {
			t.Errorf("payment %s after the sweep: %s, want pending", id, got.Status)
		}
	}
	// A Stripe that refuses every read: counted as failed, tried again later.
	if r := e.sweep(t, stripemock.Misrouted(t, e.mock)); r != (stripepay.Report{Checked: 2, Failed: 2}) {
		t.Errorf("sweep against a refusing Stripe: %v, want 2 checked, 2 failed", r)
	}
}

// TestSweep_HealsLostEvent: an intent that succeeded at Stripe whose event
// never arrived is completed by the sweep; the event arriving late after
// all changes nothing: one grant, one receipt.
func TestSweep_HealsLostEvent(t *testing.T) {
	e := newSweepEnv(t)
	p, succeeded := e.paidLater(t, "lost")
	if r := e.sweep(t, succeeded); r != (stripepay.Report{Checked: 1, Applied: 1}) {
		t.Fatalf("sweep: %v, want 1 checked and applied", r)
	}
	got := e.get(t, p.ID)
	if got.Status != payment.StatusSucceeded || len(got.EntitlementIDs) != 1 || e.receipts(t) != 1 {
		t.Fatalf("after the sweep: %s, %d entitlements, %d receipts; want succeeded, 1, 1", got.Status, len(got.EntitlementIDs), e.receipts(t))
	}
	h := &webhook.Stripe{Payments: e.store, Secret: "whsec_sweep", Issuer: "https://stipend.test", Sign: pureSign, Logger: slog.New(slog.DiscardHandler)}
	ev := fmt.Sprintf(`{"id":"evt_late","object":"event","type":"payment_intent.succeeded","data":{"object":`+
		`{"id":%q,"object":"payment_intent","status":"succeeded","amount_received":1500,"currency":"usd","metadata":{"stipend_payment_id":%q}}}}`,
		p.ProviderIntentID, p.ID)
	signed := stripewebhook.GenerateTestSignedPayload(&stripewebhook.UnsignedPayload{Payload: []byte(ev), Secret: "whsec_sweep"})
	if status, err := h.Handle(context.Background(), signed.Payload, signed.Header); status != http.StatusOK {
		t.Fatalf("late event: %d (%v), want 200", status, err)
	}
	if again := e.get(t, p.ID); again.ReceiptID != got.ReceiptID || e.receipts(t) != 1 {
		t.Errorf("after the late event: receipt %s (want %s), %d receipts (want 1)", again.ReceiptID, got.ReceiptID, e.receipts(t))
	}
	if r := e.sweep(t, succeeded); r.Checked != 0 {
		t.Errorf("second sweep: %v, want nothing pending", r)
	}
}

// TestSweep_Ends: the sweep applies each end an object can reach at Stripe.
func TestSweep_Ends(t *testing.T) {
	for _, tc := range []struct {
		name     string
		checkout bool
		patch    map[string]any
		want     payment.Status
		intent   bool // the payment ends linked to the session's intent
	}{
		{"IntentCanceled", false, map[string]any{"status": "canceled", "cancellation_reason": "abandoned"}, payment.StatusFailed, false},
		{"IntentAmountMismatch", false, map[string]any{"status": "succeeded", "amount_received": 100, "currency": "usd"}, payment.StatusPending, false},
		{"SessionPaid", true, map[string]any{"status": "complete", "payment_status": "paid", "amount_total": 1500, "currency": "usd", "payment_intent": "pi_paid"}, payment.StatusSucceeded, true},
		{"SessionExpired", true, map[string]any{"status": "expired", "payment_status": "unpaid", "payment_intent": nil}, payment.StatusFailed, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newSweepEnv(t)
			var p payment.Payment
			if tc.checkout {
				p = e.checkoutPayment(t, tc.name)
			} else {
				p = e.intentPayment(t, tc.name)
			}
			e.clock.Advance(time.Hour)
			e.sweep(t, stripemock.Patched(t, e.mock, tc.patch))
			got := e.get(t, p.ID)
			if got.Status != tc.want {
				t.Errorf("after the sweep: %s, want %s", got.Status, tc.want)
			}
			if tc.intent && got.ProviderIntentID != "pi_paid" {
				t.Errorf("intent %q, want pi_paid", got.ProviderIntentID)
			}
		})
	}
}

// TestSweep_BacksOffByAge: one instance's sweep, ticking every minute,
// reads a payment that stays pending at its read points only (Age, 2×Age,
// …), not at every tick; a read that failed is tried again at the next.
func TestSweep_BacksOffByAge(t *testing.T) {
	e := newSweepEnv(t)
	e.intentPayment(t, "backoff")
	refusing := stripemock.Misrouted(t, e.mock)
	s := &stripepay.Sweep{Store: e.store, Applier: e.applier(), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)}
	tick := func(base string) stripepay.Report {
		t.Helper()
		s.Stripe = stripemock.Client(t, base)
		r, err := s.Once(t.Context())
		if err != nil {
			t.Fatalf("Sweep.Once: %v", err)
		}
		return r
	}
	e.clock.Advance(stripepay.DefaultSweepAge + time.Second) // age 5 min: the first read
	if r := tick(refusing); r != (stripepay.Report{Checked: 1, Failed: 1}) {
		t.Fatalf("first tick against a refusing Stripe: %v, want 1 checked, 1 failed", r)
	}
	e.clock.Advance(time.Minute) // 6 min: no read point, but the failed read is tried again
	if r := tick(e.mock); r != (stripepay.Report{Checked: 1}) {
		t.Fatalf("tick after a failed read: %v, want the payment read again", r)
	}
	for range 3 { // 7, 8, 9 min
		e.clock.Advance(time.Minute)
		if r := tick(e.mock); r.Checked != 0 {
			t.Fatalf("tick between read points at %s: %v, want nothing read", e.clock.Now(), r)
		}
	}
	e.clock.Advance(time.Minute) // 10 min = 2×Age
	if r := tick(e.mock); r.Checked != 1 {
		t.Errorf("tick at 2×Age: %v, want the payment read", r)
	}
}

// TestSweep_TakesTurns: with Claims, an instance sweeps only at the ticks
// whose turn it claims: while another instance holds the turn, its Run
// reads nothing; once the turn is free, it sweeps (issue 29: every
// instance read every pending payment every minute).
func TestSweep_TakesTurns(t *testing.T) {
	e := newSweepEnv(t)
	p, succeeded := e.paidLater(t, "turns")
	if won, err := e.store.ClaimJob(t.Context(), stripepay.SweepJob, "instance-a", e.clock.Now().Add(time.Hour)); err != nil || !won {
		t.Fatalf("instance a's claim: %t, %v", won, err)
	}
	b := &stripepay.Sweep{Store: e.store, Stripe: stripemock.Client(t, succeeded), Applier: e.applier(), Now: e.clock.Now,
		Logger: slog.New(slog.DiscardHandler), Claims: e.store, Owner: "instance-b"}
	run := func() {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		defer cancel()
		b.Run(ctx, 20*time.Millisecond)
	}
	run()
	if got := e.get(t, p.ID); got.Status != payment.StatusPending {
		t.Fatalf("while instance a holds the turn, instance b's sweep moved the payment to %s", got.Status)
	}
	e.clock.Advance(time.Hour) // instance a's turn ends (it stopped)
	run()
	if got := e.get(t, p.ID); got.Status != payment.StatusSucceeded {
		t.Errorf("once the turn was free, instance b's sweep left the payment %s, want succeeded", got.Status)
	}
}
