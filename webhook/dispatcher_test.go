package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

func TestDispatcher_SendsVerifiableRequests(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, rc.srv.URL+"/hooks")
	d := e.enqueue(t)
	// The reference verifier checks the timestamp against the real clock.
	once(t, e.dispatcher(webhook.Config{Now: time.Now}), 1)

	reqs := rc.requests()
	if len(reqs) != 1 {
		t.Fatalf("receiver got %d requests, want 1", len(reqs))
	}
	wh, err := standardwebhooks.NewWebhook(e.endpoint.Secret)
	if err != nil {
		t.Fatalf("standardwebhooks.NewWebhook: %v", err)
	}
	if err := wh.Verify(reqs[0].Body, reqs[0].Header); err != nil {
		t.Errorf("Standard Webhooks reference Verify: %v", err)
	}
	if !bytes.Equal(reqs[0].Body, d.Payload) {
		t.Errorf("body = %s, want the stored payload %s", reqs[0].Body, d.Payload)
	}
	for header, want := range map[string]string{"webhook-id": d.ID, "Content-Type": "application/json", "User-Agent": webhook.UserAgent} {
		if got := reqs[0].Header.Get(header); got != want {
			t.Errorf("header %s = %q, want %q", header, got, want)
		}
	}
	if got := e.delivery(t, d.ID); got.Status != store.DeliverySucceeded || got.LastStatusCode != 200 || got.Attempts != 1 {
		t.Errorf("delivery = %s, code %d, attempts %d; want succeeded, 200, 1", got.Status, got.LastStatusCode, got.Attempts)
	}
}

func TestDispatcher_RetriesOnScheduleWithSameID(t *testing.T) {
	rc := newReceiver(t, firstThen(http.StatusInternalServerError, http.StatusNoContent))
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	disp := e.dispatcher(webhook.Config{Schedule: []time.Duration{10 * time.Second}, Jitter: 0.2})
	once(t, disp, 1)

	got := e.delivery(t, d.ID)
	lo, hi := e.clock.Now().Add(8*time.Second), e.clock.Now().Add(12*time.Second)
	if got.Status != store.DeliveryPending || got.ScheduledAt.Before(lo) || got.ScheduledAt.After(hi) || got.LastStatusCode != 500 {
		t.Fatalf("after a 500: %s at %v, code %d; want pending between %v and %v, 500", got.Status, got.ScheduledAt, got.LastStatusCode, lo, hi)
	}
	once(t, disp, 0) // not due yet
	e.clock.Set(hi)
	once(t, disp, 1)
	if got := e.delivery(t, d.ID); got.Status != store.DeliverySucceeded || got.Attempts != 2 {
		t.Errorf("after the retry: %s, attempts %d; want succeeded, 2", got.Status, got.Attempts)
	}
	reqs := rc.requests()
	if len(reqs) != 2 || reqs[0].Header.Get("webhook-id") != reqs[1].Header.Get("webhook-id") {
		t.Fatalf("requests = %d; want 2 with one webhook-id", len(reqs))
	}
	if !bytes.Equal(reqs[0].Body, reqs[1].Body) {
		t.Errorf("retry body %s differs from the first %s", reqs[1].Body, reqs[0].Body)
	}
}

func TestDispatcher_HonoursRetryAfter(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Retry-After", "600")
		w.WriteHeader(http.StatusTooManyRequests)
	})
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	once(t, e.dispatcher(webhook.Config{Schedule: []time.Duration{time.Second}}), 1)
	got := e.delivery(t, d.ID)
	if want := e.clock.Now().Add(600 * time.Second); got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(want) {
		t.Errorf("after 429 with Retry-After: 600: %s at %v; want pending at %v", got.Status, got.ScheduledAt, want)
	}
}

func TestDispatcher_GoneDisablesEndpoint(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusGone) })
	e := newEnv(t, rc.srv.URL)
	first := e.enqueue(t)
	e.clock.Advance(time.Second) // so first is claimed first
	second := e.enqueue(t)
	disp := e.dispatcher(webhook.Config{Concurrency: 1})
	once(t, disp, 1)
	if got := e.delivery(t, first.ID); got.Status != store.DeliveryFailed || got.LastStatusCode != 410 {
		t.Errorf("after 410: %s, code %d; want failed, 410", got.Status, got.LastStatusCode)
	}
	ep, err := e.store.GetEndpoint(context.Background(), e.endpoint.ID)
	if err != nil || !ep.Disabled {
		t.Fatalf("endpoint after 410: disabled %v, %v; want disabled", ep.Disabled, err)
	}
	once(t, disp, 1)
	if got := e.delivery(t, second.ID); got.Status != store.DeliveryFailed || !strings.Contains(got.LastError, "disabled") {
		t.Errorf("delivery to the disabled endpoint: %s (%q); want failed, endpoint disabled", got.Status, got.LastError)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("receiver got %d requests, want 1 (none after the 410)", n)
	}
}

func TestDispatcher_DoesNotFollowRedirects(t *testing.T) {
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/moved" {
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Redirect(w, r, "/moved", http.StatusTemporaryRedirect)
	})
	e := newEnv(t, rc.srv.URL+"/hooks")
	d := e.enqueue(t)
	once(t, e.dispatcher(webhook.Config{}), 1)
	if n := len(rc.requests()); n != 1 {
		t.Errorf("receiver got %d requests, want 1 (the redirect not followed)", n)
	}
	if got := e.delivery(t, d.ID); got.Status != store.DeliveryPending || got.LastStatusCode != 307 {
		t.Errorf("after a redirect: %s, code %d; want pending (a failed attempt), 307", got.Status, got.LastStatusCode)
	}
}

func TestDispatcher_DeadAfterScheduleThenManualRetry(t *testing.T) {
	var healthy atomic.Bool
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, _ *http.Request) {
		if healthy.Load() {
			w.WriteHeader(http.StatusOK)
			return
		}
		w.WriteHeader(http.StatusBadGateway)
	})
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	disp := e.dispatcher(webhook.Config{Schedule: []time.Duration{time.Second, time.Second}, Jitter: -1})
	for i := range 3 {
		once(t, disp, 1)
		e.clock.Advance(time.Second)
		if i < 2 {
			if got := e.delivery(t, d.ID); got.Status != store.DeliveryPending {
				t.Fatalf("after failed attempt %d: %s, want pending", i+1, got.Status)
			}
		}
	}
	if got := e.delivery(t, d.ID); got.Status != store.DeliveryDead || got.Attempts != 3 {
		t.Fatalf("after the schedule: %s, attempts %d; want dead, 3", got.Status, got.Attempts)
	}
	once(t, disp, 0)
	if _, err := webhook.Retry(context.Background(), e.store, d.ID); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	healthy.Store(true)
	once(t, disp, 1)
	if got := e.delivery(t, d.ID); got.Status != store.DeliverySucceeded || got.Attempts != 4 {
		t.Errorf("after the manual retry: %s, attempts %d; want succeeded, 4", got.Status, got.Attempts)
	}
}

func TestDispatcher_RefusesLoopbackUnlessAllowed(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	disp := webhook.NewDispatcher(e.store, nil, webhook.Config{Now: e.clock.Now}) // AllowPrivate false
	once(t, disp, 1)
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver on loopback got %d requests, want 0", n)
	}
	got := e.delivery(t, d.ID)
	if got.Status != store.DeliveryPending || !strings.Contains(got.LastError, "refused") {
		t.Errorf("after a refused dial: %s (%q); want pending with a refusal", got.Status, got.LastError)
	}
}

func TestDispatcher_RefusesNamesResolvingToLoopback(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, strings.Replace(rc.srv.URL, "127.0.0.1", "localhost", 1))
	d := e.enqueue(t)
	once(t, webhook.NewDispatcher(e.store, nil, webhook.Config{Now: e.clock.Now}), 1)
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver at localhost got %d requests, want 0", n)
	}
	if got := e.delivery(t, d.ID); !strings.Contains(got.LastError, "refused") {
		t.Errorf("last error = %q, want a refusal", got.LastError)
	}
}

func TestDispatcher_AttemptTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(_ int, w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	})
	t.Cleanup(func() { close(release) })
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	once(t, e.dispatcher(webhook.Config{AttemptTimeout: 100 * time.Millisecond}), 1)
	if got := e.delivery(t, d.ID); got.Status != store.DeliveryPending || got.LastError == "" {
		t.Errorf("after a timeout: %s (%q); want pending with an error", got.Status, got.LastError)
	}
}

func TestDispatcher_Run(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, rc.srv.URL)
	const n = 10
	for range n {
		e.enqueue(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- e.dispatcher(webhook.Config{Concurrency: 3, PollInterval: 10 * time.Millisecond}).Run(ctx)
	}()
	timeout := time.After(30 * time.Second)
	for got := 0; got < n; got++ {
		select {
		case <-rc.got:
		case <-timeout:
			t.Fatalf("receiver got %d of %d deliveries", got, n)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel = %v, want nil", err)
	}
	succeeded, _, err := e.store.ListDeliveries(context.Background(), store.DeliveryFilter{Status: store.DeliverySucceeded}, store.Page{})
	if err != nil || len(succeeded) != n {
		t.Errorf("succeeded deliveries = %d, %v; want %d", len(succeeded), err, n)
	}
}

// TestDispatcher_RunDeliversOutboxEvents goes from a payment completed in
// the store to signed requests at the receiver: the store's outbox events
// are fanned out by the running dispatcher and delivered.
func TestDispatcher_RunDeliversOutboxEvents(t *testing.T) {
	type got struct{ Type string }
	rc := newReceiver(t, nil)
	e := newStripeEnv(t)
	ep, err := e.store.CreateEndpoint(context.Background(), store.Endpoint{ID: "ep-1", URL: rc.srv.URL, Secret: webhook.NewSecret()})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	p := e.payment(t, "pi_run")
	if _, err := e.store.CompletePayment(context.Background(), p.ID, store.PaymentChange{Issuer: "x", Sign: pureSign}); err != nil {
		t.Fatalf("CompletePayment: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	d := webhook.NewDispatcher(e.store, e.store, webhook.Config{AllowPrivate: true, PollInterval: 10 * time.Millisecond})
	go func() { done <- d.Run(ctx) }()
	timeout := time.After(30 * time.Second)
	for n := 0; n < 2; n++ {
		select {
		case <-rc.got:
		case <-timeout:
			t.Fatalf("receiver got %d requests, want 2 (payment.succeeded, entitlement.granted)", n)
		}
	}
	cancel()
	<-done
	seen := map[string]bool{}
	wh, err := standardwebhooks.NewWebhook(ep.Secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rc.requests() {
		var body got
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatalf("body %s: %v", r.Body, err)
		}
		seen[body.Type] = true
		if err := wh.Verify(r.Body, r.Header); err != nil {
			t.Errorf("%s: reference Verify: %v", body.Type, err)
		}
	}
	for _, want := range []string{"payment.succeeded", "entitlement.granted"} {
		if !seen[want] {
			t.Errorf("receiver never got %s; got %v", want, seen)
		}
	}
	if pending, err := e.store.PendingEvents(context.Background(), 10); err != nil || len(pending) != 0 {
		t.Errorf("outbox after the run: %d pending, %v; want 0", len(pending), err)
	}
}

// TestDispatcher_HangingEndpointDoesNotHoldTheOthers: once requests to an
// endpoint get no answer, its other claimed deliveries are deferred without
// a request and without spending an attempt, so a healthy endpoint's
// delivery behind them goes out at the next claim instead of waiting for
// every hanging request to time out.
func TestDispatcher_HangingEndpointDoesNotHoldTheOthers(t *testing.T) {
	hanging := newReceiver(t, func(_ int, _ http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	healthy := newReceiver(t, nil)
	e := newEnv(t, hanging.srv.URL)
	var stuck []store.Delivery
	for range 8 {
		stuck = append(stuck, e.enqueue(t))
		e.clock.Advance(time.Millisecond) // claims go oldest first
	}
	ep, err := e.store.CreateEndpoint(context.Background(), store.Endpoint{ID: "healthy", URL: healthy.srv.URL, Secret: webhook.NewSecret()})
	if err != nil {
		t.Fatal(err)
	}
	e.endpoint = ep
	good := e.enqueue(t)
	d := e.dispatcher(webhook.Config{Concurrency: 4, AttemptTimeout: 100 * time.Millisecond, EndpointCooldown: time.Minute})

	once(t, d, 4) // four requests to the hanging receiver, each timing out
	once(t, d, 4) // the next four are deferred: no request
	if n := len(hanging.requests()); n != 4 {
		t.Fatalf("hanging receiver got %d requests, want 4 (the rest deferred)", n)
	}
	for _, s := range stuck[4:] {
		got := e.delivery(t, s.ID)
		if got.Status != store.DeliveryPending || got.Attempts != 0 || !got.ScheduledAt.After(e.clock.Now()) {
			t.Errorf("deferred delivery = %s, attempts %d, scheduled %v; want pending, no attempt spent, later than now", got.Status, got.Attempts, got.ScheduledAt)
		}
	}
	once(t, d, 1) // the healthy endpoint's delivery
	if got := e.delivery(t, good.ID); got.Status != store.DeliverySucceeded || len(healthy.requests()) != 1 {
		t.Errorf("healthy delivery = %s after %d requests, want succeeded after 1", got.Status, len(healthy.requests()))
	}
	// After the cooldown the hanging endpoint is tried again.
	e.clock.Advance(2 * time.Minute)
	once(t, d, 4)
	if n := len(hanging.requests()); n != 8 {
		t.Errorf("hanging receiver got %d requests after the cooldown, want 8", n)
	}
}
