package stripepay_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/stripepay"
	"github.com/stipend-mcp/stipend/topup"
)

func usd(c int64) money.Money { return money.Money{Cents: c, Currency: "USD"} }

// Stripe-mock answers patched as Stripe answers an off-session charge that
// succeeded, and one the card's bank declined.
var (
	succeeded = map[string]any{"status": "succeeded", "amount_received": 1000, "currency": "usd"}
	declined  = map[string]any{"status": "requires_payment_method", "amount_received": 0, "currency": "usd",
		"last_payment_error": map[string]any{"type": "card_error", "code": "card_declined", "decline_code": "generic_decline", "message": "Your card was declined."}}
)

// topUpEnv is a memory store with agent-1 holding credits, top-up on
// (below 500, buy 1000, at most dailyCap a day), and Stripe at a
// recording proxy over stripe-mock answering as patch says.
type topUpEnv struct {
	store    *memory.Store
	clock    *conformance.Clock
	url      string
	requests func() []stripemock.Request
}

const topUpAgent = "agent-1"

func newTopUpEnv(t *testing.T, credits, dailyCap int64, patch map[string]any) *topUpEnv {
	t.Helper()
	clock := conformance.NewClock()
	clock.Set(time.Date(2026, 3, 4, 10, 0, 0, 0, time.UTC))
	st := memory.New(memory.WithClock(clock.Now))
	url, requests := stripemock.Recording(t, stripemock.Patched(t, stripemock.URL(t), patch))
	e := &topUpEnv{store: st, clock: clock, url: url, requests: requests}
	ctx := context.Background()
	if _, err := st.CreateEntitlement(ctx, entitlement.Entitlement{ID: "ent-1", AgentID: topUpAgent, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: "search"}, Credits: entitlement.Credits{Balance: usd(credits), Granted: usd(credits)}}); err != nil {
		t.Fatalf("CreateEntitlement: %v", err)
	}
	if _, err := st.SaveTopUpMethod(ctx, topUpAgent, topup.Method{Customer: "cus_1", PaymentMethod: "pm_1"}); err != nil {
		t.Fatalf("SaveTopUpMethod: %v", err)
	}
	if _, err := st.PutTopUp(ctx, topUpAgent, topup.Settings{Threshold: usd(500), Amount: usd(1000), DailyCap: usd(dailyCap),
		Scope: entitlement.Scope{Service: "search"}}); err != nil {
		t.Fatalf("PutTopUp: %v", err)
	}
	return e
}

// instance is one Stipend instance's auto top-up over the shared store.
func (e *topUpEnv) instance(t *testing.T) *stripepay.TopUps {
	return &stripepay.TopUps{Store: e.store, Stripe: stripemock.Client(t, e.url), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler),
		Applier: &stripepay.Applier{Payments: e.store, Issuer: "https://stipend.test", Sign: pureSign, Logger: slog.New(slog.DiscardHandler)}}
}

// spend charges cents from agent-1.
func (e *topUpEnv) spend(t *testing.T, key string, cents int64) {
	t.Helper()
	res, err := e.store.CheckAndConsume(context.Background(), entitlement.ConsumeRequest{AgentID: topUpAgent, Service: "search", Tool: "q",
		IdempotencyKey: key, Cost: ptr(usd(cents))})
	if err != nil || res.Outcome != store.Consumed {
		t.Fatalf("CheckAndConsume(%s, %d) = %s, %v; want consumed", key, cents, res.Outcome, err)
	}
}

func ptr[T any](v T) *T { return &v }

// intents returns the PaymentIntent creations Stripe received.
func (e *topUpEnv) intents() []stripemock.Request {
	var out []stripemock.Request
	for _, r := range e.requests() {
		if r.Method == "POST" && r.Path == "/v1/payment_intents" {
			out = append(out, r)
		}
	}
	return out
}

func (e *topUpEnv) topUp(t *testing.T) topup.TopUp {
	t.Helper()
	tu, err := e.store.GetTopUp(context.Background(), topUpAgent)
	if err != nil {
		t.Fatalf("GetTopUp: %v", err)
	}
	return tu
}

func (e *topUpEnv) available(t *testing.T, tu *stripepay.TopUps) int64 {
	t.Helper()
	n, err := tu.Available(context.Background(), topUpAgent, "USD")
	if err != nil {
		t.Fatalf("Available: %v", err)
	}
	return n
}

func check(t *testing.T, tu *stripepay.TopUps) {
	t.Helper()
	if err := tu.Check(context.Background(), topUpAgent); err != nil {
		t.Fatalf("Check: %v", err)
	}
}

// TestTopUps_OneCrossingOneTopUp: eight instances checking one crossing at
// once make one top-up and one PaymentIntent, whose success grants it.
func TestTopUps_OneCrossingOneTopUp(t *testing.T) {
	e := newTopUpEnv(t, 800, 5000, succeeded)
	first := e.instance(t)
	check(t, first)
	if n := len(e.intents()); n != 0 {
		t.Fatalf("PaymentIntents above the threshold = %d, want 0", n)
	}
	e.spend(t, "k1", 400) // 400 left: below 500
	var wg sync.WaitGroup
	for range 8 {
		tu := e.instance(t)
		wg.Go(func() {
			if err := tu.Check(context.Background(), topUpAgent); err != nil {
				t.Errorf("Check: %v", err)
			}
		})
	}
	wg.Wait()
	intents := e.intents()
	if len(intents) != 1 {
		t.Fatalf("PaymentIntents made by 8 concurrent checks = %d, want 1", len(intents))
	}
	f := intents[0].Form
	if f.Get("off_session") != "true" || f.Get("confirm") != "true" || f.Get("customer") != "cus_1" || f.Get("payment_method") != "pm_1" ||
		f.Get("metadata["+payment.MetadataKey+"]") != topup.PaymentID(topUpAgent, 1) {
		t.Errorf("PaymentIntent form = %v, want off session, confirmed, the saved method, the payment in metadata", f)
	}
	if got := e.available(t, first); got != 1400 {
		t.Errorf("available after the top-up = %d, want 1400", got)
	}
	if tu := e.topUp(t); tu.Seq != 1 || tu.PendingPaymentID != "" || tu.DayTotal != usd(1000) {
		t.Errorf("top-up = %+v, want one, settled, 1000 today", tu)
	}
	check(t, first) // above the threshold again: nothing
	if n := len(e.intents()); n != 1 {
		t.Errorf("PaymentIntents after a check above the threshold = %d, want 1", n)
	}
}

// TestTopUps_DailyCap: a top-up that would pass the day's cap does not
// begin; the next UTC day it does.
func TestTopUps_DailyCap(t *testing.T) {
	e := newTopUpEnv(t, 400, 2000, succeeded)
	tu := e.instance(t)
	check(t, tu) // 400 → 1400
	e.spend(t, "k1", 1000)
	check(t, tu) // 400 → 1400, 2000 today
	e.spend(t, "k2", 1000)
	check(t, tu) // 400: the cap is reached
	if n := len(e.intents()); n != 2 {
		t.Fatalf("PaymentIntents on the first day = %d, want 2 (the cap)", n)
	}
	if got := e.available(t, tu); got != 400 {
		t.Errorf("available at the cap = %d, want 400", got)
	}
	e.clock.Set(time.Date(2026, 3, 5, 0, 0, 1, 0, time.UTC))
	check(t, tu)
	if n := len(e.intents()); n != 3 {
		t.Errorf("PaymentIntents on the next day = %d, want 3", n)
	}
}

// TestTopUps_ThreeFailuresDisable: Stripe declines three off-session
// charges in a row: each fails its payment and writes topup.failed, and
// pauses top-up (topup.FailurePause, doubled each time): a check during the
// pause charges nothing. The third disables top-up, after which nothing is
// charged.
func TestTopUps_ThreeFailuresDisable(t *testing.T) {
	e := newTopUpEnv(t, 400, 100000, declined)
	tu := e.instance(t)
	for i := 1; i <= 3; i++ {
		check(t, tu)
		if got := e.topUp(t); got.Failures != i || got.PendingPaymentID != "" {
			t.Fatalf("after decline %d: failures %d, pending %q; want %d, none", i, got.Failures, got.PendingPaymentID, i)
		}
		if i < 3 {
			pause := topup.FailurePause << (i - 1)
			e.clock.Advance(pause - time.Second)
			check(t, tu) // still paused
			if n := len(e.intents()); n != i {
				t.Fatalf("PaymentIntents %s after decline %d = %d, want %d (paused)", pause-time.Second, i, n, i)
			}
			e.clock.Advance(time.Second)
		}
		p, err := e.store.GetPayment(context.Background(), topup.PaymentID(topUpAgent, int64(i)))
		if err != nil || p.Status != payment.StatusFailed || p.FailureReason != "stripe: card_declined/generic_decline: Your card was declined." {
			t.Errorf("top-up payment %d = %s %q, %v; want failed with Stripe's decline", i, p.Status, p.FailureReason, err)
		}
	}
	got := e.topUp(t)
	if got.Enabled || got.DisabledReason == "" {
		t.Errorf("top-up after three declines = enabled %v, reason %q; want disabled with a reason", got.Enabled, got.DisabledReason)
	}
	check(t, tu)
	if n := len(e.intents()); n != 3 {
		t.Errorf("PaymentIntents = %d, want 3 (none once disabled)", n)
	}
	evs, err := e.store.PendingEvents(context.Background(), store.MaxPageSize)
	if err != nil {
		t.Fatal(err)
	}
	var failures []topup.Failure
	for _, ev := range evs {
		if ev.Type == event.TopUpFailed {
			var f topup.Failure
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				t.Fatal(err)
			}
			failures = append(failures, f)
		}
	}
	if len(failures) != 3 || !failures[2].Disabled || failures[1].Disabled || failures[2].ConsecutiveFailures != 3 {
		t.Errorf("topup.failed events = %+v, want 3, the last one disabling", failures)
	}
}

// TestTopUps_CrashHealedBySweep: a crash between BeginTopUp and its
// PaymentIntent leaves a pending top-up payment with no intent; the
// sweep makes its one PaymentIntent, keyed as the crashed instance would
// have, and a second sweep makes none.
func TestTopUps_CrashHealedBySweep(t *testing.T) {
	e := newTopUpEnv(t, 400, 5000, succeeded)
	p, err := e.store.BeginTopUp(context.Background(), topUpAgent, 0) // the instance dies here
	if err != nil {
		t.Fatalf("BeginTopUp: %v", err)
	}
	sweep := &stripepay.Sweep{Store: e.store, Stripe: stripemock.Client(t, e.url), Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler),
		Applier: e.instance(t).Applier, TopUps: e.instance(t)}
	// Young, it may still be in the making by the instance that began it.
	if _, err := sweep.Once(context.Background()); err != nil || len(e.intents()) != 0 {
		t.Fatalf("Sweep.Once of a young pending top-up: %v, %d PaymentIntents; want none made", err, len(e.intents()))
	}
	e.clock.Advance(stripepay.DefaultSweepAge + time.Second) // past the age at which a check resumes it
	for range 2 {
		r, err := sweep.Once(context.Background())
		if err != nil || r.TopUpsChecked != 1 || r.TopUpsFailed != 0 {
			t.Fatalf("Sweep.Once = %+v, %v; want one top-up checked", r, err)
		}
	}
	intents := e.intents()
	if len(intents) != 1 {
		t.Fatalf("PaymentIntents after two sweeps = %d, want 1", len(intents))
	}
	got, err := e.store.GetPayment(context.Background(), p.ID)
	if err != nil || got.Status != payment.StatusSucceeded || got.ProviderIntentID == "" {
		t.Errorf("healed top-up payment = %+v, %v; want succeeded, linked", got, err)
	}
	// The crashed instance, had it lived, sent the same key: one object at Stripe.
	if _, err := stripemock.Client(t, e.url).CreateTopUpIntent(context.Background(), &p, topup.Method{Customer: "cus_1", PaymentMethod: "pm_1"}); err != nil {
		t.Fatalf("CreateTopUpIntent: %v", err)
	}
	if again := e.intents(); again[1].IdempotencyKey != intents[0].IdempotencyKey || intents[0].IdempotencyKey == "" {
		t.Errorf("Idempotency-Keys %q and %q, want one, the top-up's", intents[0].IdempotencyKey, again[1].IdempotencyKey)
	}
}

// TestTopUps_Charged: a charge leaving a credits entitlement below a
// remembered threshold queues its account; the worker checks it.
func TestTopUps_Charged(t *testing.T) {
	e := newTopUpEnv(t, 800, 5000, succeeded)
	tu := e.instance(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tu.Run(ctx, 10*time.Second); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	ent, err := e.store.GetEntitlement(context.Background(), "ent-1")
	if err != nil {
		t.Fatal(err)
	}
	tu.Charged(&ent) // unknown account: checked, and remembered (800: no top-up)
	e.spend(t, "k1", 400)
	if ent, err = e.store.GetEntitlement(context.Background(), "ent-1"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for e.topUp(t).Seq == 0 || e.topUp(t).PendingPaymentID != "" {
		tu.Charged(&ent) // 400 < 500: queued (at most once at a time)
		if time.Now().After(deadline) {
			t.Fatalf("no top-up 30 s after charges below the threshold: %+v", e.topUp(t))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := len(e.intents()); n != 1 {
		t.Errorf("PaymentIntents = %d, want 1", n)
	}
}
