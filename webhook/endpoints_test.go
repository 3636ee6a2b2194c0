package webhook_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// verifyWith checks a request with the Standard Webhooks reference library
// holding only secret. The test clock is not the real one, so the timestamp
// is not checked here (TestSetHeaders_TwoSecrets checks it).
func verifyWith(t *testing.T, secret string, r request) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("standardwebhooks.NewWebhook: %v", err)
	}
	return wh.VerifyIgnoringTimestamp(r.Body, r.Header)
}

// TestDispatcher_RotationSignsWithBothSecrets: within a rotation's grace
// period every request carries a signature by the new secret and one by the
// old, so a receiver holding either accepts it; after the grace period only
// the new one signs.
func TestDispatcher_RotationSignsWithBothSecrets(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, rc.srv.URL)
	old, next := e.endpoint.Secret, webhook.NewSecret()
	graceUntil := e.clock.Now().Add(time.Hour)
	if _, err := e.store.RotateEndpointSecret(context.Background(), e.endpoint.ID, next, graceUntil); err != nil {
		t.Fatalf("RotateEndpointSecret: %v", err)
	}
	disp := e.dispatcher(webhook.Config{})
	e.enqueue(t)
	once(t, disp, 1)
	e.clock.Set(graceUntil)
	e.enqueue(t)
	once(t, disp, 1)

	reqs := rc.requests()
	if len(reqs) != 2 {
		t.Fatalf("receiver got %d requests, want 2", len(reqs))
	}
	during, after := reqs[0], reqs[1]
	if n := len(strings.Fields(during.Header.Get(webhook.HeaderSignature))); n != 2 {
		t.Errorf("within the grace period: %d signatures, want 2 (%q)", n, during.Header.Get(webhook.HeaderSignature))
	}
	for name, secret := range map[string]string{"old": old, "new": next} {
		if err := verifyWith(t, secret, during); err != nil {
			t.Errorf("within the grace period, a receiver holding the %s secret: Verify: %v", name, err)
		}
	}
	if err := verifyWith(t, next, after); err != nil {
		t.Errorf("after the grace period, a receiver holding the new secret: Verify: %v", err)
	}
	if err := verifyWith(t, old, after); err == nil {
		t.Errorf("after the grace period, a receiver holding the old secret: Verify = nil, want a mismatch")
	}
}

// TestDispatcher_DeletedEndpoint: a delivery left pending for a deleted
// endpoint fails at its next attempt without a request, and stays listed.
func TestDispatcher_DeletedEndpoint(t *testing.T) {
	rc := newReceiver(t, nil)
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	if err := e.store.DeleteEndpoint(context.Background(), e.endpoint.ID); err != nil {
		t.Fatalf("DeleteEndpoint: %v", err)
	}
	once(t, e.dispatcher(webhook.Config{}), 1)
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver of a deleted endpoint got %d requests, want 0", n)
	}
	if got := e.delivery(t, d.ID); got.Status != store.DeliveryFailed || !strings.Contains(got.LastError, "no longer exists") {
		t.Errorf("delivery to a deleted endpoint = %s (%q); want failed, endpoint no longer exists", got.Status, got.LastError)
	}
}

// TestDispatcher_ReenabledEndpoint: after a 410 disabled the endpoint,
// enabling it again (UpdateEndpoint) lets new deliveries through, and the
// one that failed can be retried by hand.
func TestDispatcher_ReenabledEndpoint(t *testing.T) {
	rc := newReceiver(t, firstThen(http.StatusGone, http.StatusNoContent))
	e := newEnv(t, rc.srv.URL)
	gone := e.enqueue(t)
	disp := e.dispatcher(webhook.Config{})
	once(t, disp, 1)
	ctx := context.Background()
	ep, err := e.store.UpdateEndpoint(ctx, e.endpoint.ID, store.EndpointUpdate{Enable: true})
	if err != nil || ep.Disabled {
		t.Fatalf("UpdateEndpoint(enable) = disabled %v, %v; want enabled", ep.Disabled, err)
	}
	next := e.enqueue(t)
	if _, err := webhook.Retry(ctx, e.store, gone.ID); err != nil {
		t.Fatalf("Retry: %v", err)
	}
	once(t, disp, 2)
	for _, id := range []string{gone.ID, next.ID} {
		if got := e.delivery(t, id); got.Status != store.DeliverySucceeded {
			t.Errorf("delivery %s after re-enabling = %s, want succeeded", id, got.Status)
		}
	}
}

// TestDispatcher_TimedOutDeliveryWaitsForCooldown: the delivery whose
// request timed out comes due after its retry wait (5 s here), but its
// endpoint is cooling down (1 min): it is deferred to the cooldown's end
// without a request and without spending an attempt, and only then sent.
func TestDispatcher_TimedOutDeliveryWaitsForCooldown(t *testing.T) {
	rc := newReceiver(t, func(n int, w http.ResponseWriter, r *http.Request) {
		if n == 0 {
			<-r.Context().Done() // the first request hangs until the attempt times out
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	e := newEnv(t, rc.srv.URL)
	d := e.enqueue(t)
	disp := e.dispatcher(webhook.Config{AttemptTimeout: 100 * time.Millisecond, Schedule: []time.Duration{5 * time.Second},
		Jitter: -1, EndpointCooldown: time.Minute})
	start := e.clock.Now()
	once(t, disp, 1)
	if got := e.delivery(t, d.ID); got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(start.Add(5*time.Second)) {
		t.Fatalf("after the timeout: %s at %v, want pending at %v", got.Status, got.ScheduledAt, start.Add(5*time.Second))
	}
	e.clock.Advance(5 * time.Second)
	once(t, disp, 1) // due, but the endpoint cools down: deferred
	got := e.delivery(t, d.ID)
	cooled := start.Add(time.Minute)
	if got.Status != store.DeliveryPending || got.Attempts != 1 || got.ScheduledAt.Before(cooled) || got.ScheduledAt.After(cooled.Add(time.Second)) {
		t.Errorf("when due during the cooldown: %s, attempts %d, at %v; want pending, 1 attempt, at the cooldown's end %v (+ ≤ 1 s)",
			got.Status, got.Attempts, got.ScheduledAt, cooled)
	}
	if n := len(rc.requests()); n != 1 {
		t.Errorf("receiver got %d requests during the cooldown, want 1 (the one that timed out)", n)
	}
	e.clock.Set(got.ScheduledAt)
	once(t, disp, 1)
	if got := e.delivery(t, d.ID); got.Status != store.DeliverySucceeded || got.Attempts != 2 {
		t.Errorf("after the cooldown: %s, attempts %d; want succeeded, 2", got.Status, got.Attempts)
	}
}
