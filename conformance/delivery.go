package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// TestSecret is a valid endpoint secret for tests.
const TestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

// newEndpoint creates an endpoint subscribed to types (none: every type).
func newEndpoint(t *testing.T, s store.DeliveryStore, types ...event.Type) store.Endpoint {
	t.Helper()
	e, err := s.CreateEndpoint(context.Background(), store.Endpoint{
		ID: uuid.NewString(), URL: "https://example.com/hooks", EventTypes: types, Secret: TestSecret,
	})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return e
}

// newDelivery returns a delivery of a new event to endpoint, keyed like the fan-out keys it.
func newDelivery(endpointID string, typ event.Type) store.Delivery {
	eventID := uuid.NewString()
	return store.Delivery{
		ID: uuid.NewString(), Key: eventID + ":" + endpointID, EndpointID: endpointID,
		EventID: eventID, EventType: typ,
		Payload: []byte(`{"type":"` + string(typ) + `", "data" : {"z":1,"a":[1.50,"é"]}}`),
	}
}

// enqueue enqueues d and fails the test unless it was created.
func enqueue(t *testing.T, s store.DeliveryStore, d store.Delivery) store.Delivery {
	t.Helper()
	got, created, err := s.EnqueueDelivery(context.Background(), d)
	if err != nil || !created {
		t.Fatalf("EnqueueDelivery(%s) = created %v, %v; want created", d.Key, created, err)
	}
	return got
}

// claim claims up to limit deliveries due at now for worker, failing the
// test on an error.
func claim(t *testing.T, s store.DeliveryStore, now time.Time, limit int, ttl time.Duration, worker string) []store.Delivery {
	t.Helper()
	return must(s.ClaimDueDeliveries(context.Background(), now, limit, ttl, worker))(t, "ClaimDueDeliveries(%s, %d)", now, limit)
}

// ids returns the IDs of ds, in order.
func ids(ds []store.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

// cmpEmpty treats nil and empty slices as equal.
var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

// listAllDeliveries lists every delivery that f matches, in pages of 2.
func listAllDeliveries(t *testing.T, s store.DeliveryStore, f store.DeliveryFilter) []store.Delivery {
	t.Helper()
	out, _ := allPages(t, fmt.Sprintf("ListDeliveries(%+v)", f), 2, 12, func(p store.Page) ([]store.Delivery, string, error) {
		return s.ListDeliveries(context.Background(), f, p)
	})
	return out
}

// inboundTests: RecordInboundEvent says whether an event is new, per source,
// and when it was first seen.
var inboundTests = []deliveryTest{
	{"Inbound/FirstAndLater", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		for _, tc := range []struct{ source, id string }{{"stripe", "evt_1"}, {"stripe", "evt/with.odd chars"}} {
			isNew, first, err := s.RecordInboundEvent(ctx, tc.source, tc.id)
			if err != nil || !isNew || !first.Equal(clock.Now()) {
				t.Fatalf("RecordInboundEvent(%s, %s) = %v, %v, %v; want true, %v", tc.source, tc.id, isNew, first, err, clock.Now())
			}
			want := clock.Now()
			clock.Advance(time.Hour)
			isNew, first, err = s.RecordInboundEvent(ctx, tc.source, tc.id)
			if err != nil || isNew || !first.Equal(want) {
				t.Errorf("RecordInboundEvent again = %v, %v, %v; want false, %v", isNew, first, err, want)
			}
		}
		isNew, _, err := s.RecordInboundEvent(ctx, "other", "evt_1")
		if err != nil || !isNew {
			t.Errorf("RecordInboundEvent(other, evt_1) = %v, %v; want a new event (sources are separate)", isNew, err)
		}
	}},
}

// enqueueTests: EnqueueDelivery stores the exact payload, is idempotent on
// the key, and GetDelivery reads it back.
var enqueueTests = []deliveryTest{
	{"Enqueue/StoresExactPayload", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		d.Payload = append(d.Payload, 0, 0xff, '\n')
		stored := enqueue(t, s, d)
		want := d
		want.Status, want.ScheduledAt, want.CreatedAt, want.UpdatedAt = store.DeliveryPending, Start, Start, Start
		if diff := cmp.Diff(want, stored); diff != "" {
			t.Errorf("EnqueueDelivery (-want +got):\n%s", diff)
		}
		got := must(s.GetDelivery(context.Background(), d.ID))(t, "GetDelivery")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetDelivery (-want +got):\n%s", diff)
		}
		if !bytes.Equal(got.Payload, d.Payload) {
			t.Errorf("GetDelivery payload = %q, want the exact bytes %q", got.Payload, d.Payload)
		}
		_, err := s.GetDelivery(context.Background(), "missing")
		wantCode(t, "GetDelivery(missing)", err, store.CodeNotFound)
	}},
	{"Enqueue/IdempotentOnKey", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		first := enqueue(t, s, d)
		clock.Advance(time.Minute)
		again := d
		again.ID = uuid.NewString() // a retrying caller may mint a new ID
		got, created, err := s.EnqueueDelivery(context.Background(), again)
		if err != nil || created {
			t.Fatalf("EnqueueDelivery with the same key = created %v, %v; want created false", created, err)
		}
		if diff := cmp.Diff(first, got); diff != "" {
			t.Errorf("EnqueueDelivery replay (-first +got):\n%s", diff)
		}
		other := newDelivery("ep2", event.PaymentSucceeded)
		other.Key = d.Key
		_, _, err = s.EnqueueDelivery(context.Background(), other)
		wantCode(t, "EnqueueDelivery with the key of another event", err, store.CodeConflict)
		if _, err := s.GetDelivery(context.Background(), again.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetDelivery(replayed ID) error = %v, want not found", err)
		}
	}},
	{"Enqueue/Invalid", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		d.Key = ""
		_, _, err := s.EnqueueDelivery(context.Background(), d)
		wantCode(t, "EnqueueDelivery without a key", err, store.CodeInvalid)
	}},
}

// claimTests: ClaimDueDeliveries claims only due deliveries, oldest first,
// and a claim expires after its TTL.
var claimTests = []deliveryTest{
	{"Claim/OnlyDueAndOldestFirst", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		later := newDelivery("ep1", event.PaymentSucceeded)
		later.ScheduledAt = Start.Add(time.Hour)
		enqueue(t, s, later)
		var due []string
		for range 3 {
			due = append(due, enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded)).ID)
			clock.Advance(time.Second)
		}
		// A later ScheduledAt is not claimed before its time.
		got := claim(t, s, clock.Now(), 2, time.Minute, "w1")
		if diff := cmp.Diff(due[:2], ids(got)); diff != "" {
			t.Errorf("first claim (-want +got):\n%s", diff)
		}
		got = claim(t, s, clock.Now(), 10, time.Minute, "w1")
		if diff := cmp.Diff(due[2:], ids(got)); diff != "" {
			t.Errorf("second claim (-want +got):\n%s", diff)
		}
		if got := claim(t, s, clock.Now(), 10, time.Minute, "w1"); len(got) != 0 {
			t.Errorf("third claim = %v, want none", ids(got))
		}
		got = claim(t, s, Start.Add(time.Hour), 10, 2*time.Hour, "w1")
		if diff := cmp.Diff([]string{later.ID}, ids(got)); diff != "" {
			t.Errorf("claim at the later time (-want +got):\n%s", diff)
		}
	}},
	{"Claim/InFlightAndExpiry", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		now := clock.Now()
		got := claim(t, s, now, 5, time.Minute, "w1")
		if len(got) != 1 {
			t.Fatalf("claim = %v, want [%s]", ids(got), d.ID)
		}
		c1 := got[0]
		if c1.Status != store.DeliveryInFlight || c1.Attempts != 1 || c1.ClaimedBy != "w1" || c1.ClaimToken == "" ||
			c1.ClaimedAt == nil || !c1.ClaimedAt.Equal(now) {
			t.Errorf("claimed delivery = status %s attempts %d by %q at %v token %q; want in_flight, 1, w1, %v, a token",
				c1.Status, c1.Attempts, c1.ClaimedBy, c1.ClaimedAt, c1.ClaimToken, now)
		}
		if !bytes.Equal(c1.Payload, d.Payload) {
			t.Errorf("claimed payload = %q, want %q", c1.Payload, d.Payload)
		}
		if got := claim(t, s, now.Add(59*time.Second), 5, time.Minute, "w2"); len(got) != 0 {
			t.Errorf("claim within the claim TTL = %v, want none", ids(got))
		}
		got = claim(t, s, now.Add(time.Minute), 5, time.Minute, "w2")
		if len(got) != 1 || got[0].Attempts != 2 || got[0].ClaimedBy != "w2" || got[0].ClaimToken == c1.ClaimToken {
			t.Fatalf("claim after the TTL = %+v; want the delivery again, attempt 2, by w2 with a new token", got)
		}
		c2 := got[0]
		_, err := s.FinishDelivery(ctx, d.ID, c1.ClaimToken, store.AttemptResult{Status: store.DeliverySucceeded})
		wantCode(t, "FinishDelivery with the expired claim's token", err, store.CodeConflict)
		clock.Advance(2 * time.Minute)
		fin, err := s.FinishDelivery(ctx, d.ID, c2.ClaimToken, store.AttemptResult{Status: store.DeliverySucceeded, StatusCode: 204})
		if err != nil {
			t.Fatalf("FinishDelivery: %v", err)
		}
		if fin.Status != store.DeliverySucceeded || fin.LastStatusCode != 204 || fin.Attempts != 2 || fin.ClaimToken != "" {
			t.Errorf("finished = status %s code %d attempts %d token %q; want succeeded, 204, 2, none",
				fin.Status, fin.LastStatusCode, fin.Attempts, fin.ClaimToken)
		}
		if got := claim(t, s, clock.Now().Add(time.Hour), 5, time.Minute, "w3"); len(got) != 0 {
			t.Errorf("claim after success = %v, want none", ids(got))
		}
		_, err = s.FinishDelivery(ctx, d.ID, c2.ClaimToken, store.AttemptResult{Status: store.DeliveryDead})
		wantCode(t, "FinishDelivery twice", err, store.CodeConflict)
		_, err = s.FinishDelivery(ctx, "missing", "t", store.AttemptResult{Status: store.DeliveryDead})
		wantCode(t, "FinishDelivery(missing)", err, store.CodeNotFound)
	}},
	{"Claim/CallersClock", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		// The contract's clock rule: the caller's now alone decides due-ness,
		// ClaimedAt and a claim's expiry; the store's clock, an hour ahead
		// here (a skewed instance), stamps only UpdatedAt.
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		callers := clock.Now()
		clock.Advance(time.Hour)
		got := claim(t, s, callers, 5, time.Minute, "w1")
		if len(got) != 1 || got[0].ClaimedAt == nil || !got[0].ClaimedAt.Equal(callers) || !got[0].UpdatedAt.Equal(clock.Now()) {
			t.Fatalf("claim at the caller's %v with the store's clock at %v = %+v; want claimedAt the caller's, updatedAt the store's",
				callers, clock.Now(), got)
		}
		if got := claim(t, s, callers.Add(59*time.Second), 5, time.Minute, "w2"); len(got) != 0 {
			t.Errorf("claim 59 s later by the callers' clock (an hour later by the store's) = %v, want none", ids(got))
		}
		if got := claim(t, s, callers.Add(time.Minute), 5, time.Minute, "w2"); len(got) != 1 || got[0].ID != d.ID {
			t.Errorf("claim a TTL later by the callers' clock = %v, want [%s]", ids(got), d.ID)
		}
	}},
}

// attemptTests: what FinishDelivery does with the result of an attempt
// (retry later, defer, terminal states) and RetryDelivery by hand.
var attemptTests = []deliveryTest{
	{"Attempt/FailedReturnsToPendingLater", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		retryAt := Start.Add(5 * time.Minute)
		got, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{
			Status: store.DeliveryFailed, RetryAt: retryAt, StatusCode: 500, Error: "server error"})
		if err != nil {
			t.Fatalf("FinishDelivery(failed, retry): %v", err)
		}
		if got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(retryAt) || got.LastError != "server error" || got.LastStatusCode != 500 {
			t.Errorf("after a failed attempt = status %s scheduled %v error %q code %d; want pending at %v, the error and 500",
				got.Status, got.ScheduledAt, got.LastError, got.LastStatusCode, retryAt)
		}
		if got := claim(t, s, retryAt.Add(-time.Second), 1, time.Minute, "w1"); len(got) != 0 {
			t.Errorf("claim before the retry time = %v, want none", ids(got))
		}
		if got := claim(t, s, retryAt, 1, time.Minute, "w1"); len(got) != 1 || got[0].Attempts != 2 {
			t.Errorf("claim at the retry time = %+v, want the delivery at attempt 2", got)
		}
	}},
	{"Attempt/DeferredGivesTheAttemptBack", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		if _, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{
			Status: store.DeliveryFailed, RetryAt: Start.Add(time.Minute), Error: "timeout"}); err != nil {
			t.Fatalf("FinishDelivery(failed): %v", err)
		}
		c = claim(t, s, Start.Add(time.Minute), 1, time.Minute, "w1")[0] // attempt 2
		retryAt := Start.Add(10 * time.Minute)
		got, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{
			Status: store.DeliveryFailed, RetryAt: retryAt, Deferred: true})
		if err != nil {
			t.Fatalf("FinishDelivery(deferred): %v", err)
		}
		if got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(retryAt) || got.Attempts != 1 ||
			got.LastError != "timeout" || got.ClaimToken != "" {
			t.Errorf("after a deferral = status %s scheduled %v attempts %d error %q claim %q; want pending at %v, attempts 1, the last real error kept, no claim",
				got.Status, got.ScheduledAt, got.Attempts, got.LastError, got.ClaimToken, retryAt)
		}
		if got := claim(t, s, retryAt, 1, time.Minute, "w1"); len(got) != 1 || got[0].Attempts != 2 {
			t.Errorf("claim after the deferral = %+v, want the delivery at attempt 2 again", got)
		}
		for _, bad := range []store.AttemptResult{
			{Status: store.DeliveryFailed, Deferred: true},
			{Status: store.DeliveryDead, Deferred: true},
		} {
			_, err := s.FinishDelivery(ctx, d.ID, "any", bad)
			wantCode(t, "FinishDelivery(deferred without a retry time, or not failed)", err, store.CodeInvalid)
		}
	}},
	{"Attempt/TerminalAndManualRetry", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		for _, status := range []store.DeliveryStatus{store.DeliveryFailed, store.DeliveryDead} {
			d := enqueue(t, s, newDelivery("ep1", event.PaymentFailed))
			c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
			got, err := s.FinishDelivery(ctx, d.ID, c.ClaimToken, store.AttemptResult{Status: status, Error: "gone"})
			if err != nil || got.Status != status {
				t.Fatalf("FinishDelivery(%s) = %s, %v; want %s", status, got.Status, err, status)
			}
			if got := claim(t, s, clock.Now().Add(24*time.Hour), 1, 48*time.Hour, "w1"); len(got) != 0 {
				t.Errorf("claim of a %s delivery = %v, want none", status, ids(got))
			}
			at := clock.Advance(time.Hour)
			got, err = s.RetryDelivery(ctx, d.ID)
			if err != nil || got.Status != store.DeliveryPending || !got.ScheduledAt.Equal(at) || got.Attempts != 1 {
				t.Fatalf("RetryDelivery(%s) = %s at %v attempts %d, %v; want pending at %v, attempts 1", status, got.Status, got.ScheduledAt, got.Attempts, err, at)
			}
			_, err = s.RetryDelivery(ctx, d.ID)
			wantCode(t, "RetryDelivery(pending)", err, store.CodeConflict)
			again := claim(t, s, at, 1, time.Minute, "w1")
			if len(again) != 1 || again[0].ID != d.ID {
				t.Fatalf("claim after RetryDelivery = %v, want [%s]", ids(again), d.ID)
			}
			_, err = s.RetryDelivery(ctx, d.ID)
			wantCode(t, "RetryDelivery(in_flight)", err, store.CodeConflict)
			if _, err := s.FinishDelivery(ctx, d.ID, again[0].ClaimToken, store.AttemptResult{Status: store.DeliverySucceeded}); err != nil {
				t.Fatalf("FinishDelivery after the manual retry: %v", err)
			}
		}
		_, err := s.RetryDelivery(ctx, "missing")
		wantCode(t, "RetryDelivery(missing)", err, store.CodeNotFound)
	}},
	{"Attempt/InvalidResult", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		_, err := s.FinishDelivery(context.Background(), d.ID, c.ClaimToken, store.AttemptResult{Status: store.DeliveryPending})
		wantCode(t, "FinishDelivery(pending)", err, store.CodeInvalid)
	}},
}

// listDeliveryTests: ListDeliveries filters by status and event type, over
// pages.
var listDeliveryTests = []deliveryTest{
	{"List/ByStatusAndEventType", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		types := []event.Type{event.PaymentSucceeded, event.EntitlementGranted, event.PaymentSucceeded, event.PaymentRefunded, event.PaymentSucceeded}
		var all []store.Delivery
		for _, typ := range types {
			all = append(all, enqueue(t, s, newDelivery("ep1", typ)))
			clock.Advance(time.Second)
		}
		// Claim and finish the first two: one succeeds, one is dead.
		claimed := claim(t, s, clock.Now(), 2, time.Minute, "w1")
		for i, st := range []store.DeliveryStatus{store.DeliverySucceeded, store.DeliveryDead} {
			if _, err := s.FinishDelivery(ctx, claimed[i].ID, claimed[i].ClaimToken, store.AttemptResult{Status: st}); err != nil {
				t.Fatalf("FinishDelivery: %v", err)
			}
		}
		for _, tc := range []struct {
			f    store.DeliveryFilter
			want []string
		}{
			{store.DeliveryFilter{}, ids(all)},
			{store.DeliveryFilter{Status: store.DeliveryPending}, ids(all[2:])},
			{store.DeliveryFilter{Status: store.DeliverySucceeded}, ids(all[:1])},
			{store.DeliveryFilter{EventType: event.PaymentSucceeded}, []string{all[0].ID, all[2].ID, all[4].ID}},
			{store.DeliveryFilter{Status: store.DeliveryPending, EventType: event.PaymentSucceeded}, []string{all[2].ID, all[4].ID}},
			{store.DeliveryFilter{Status: store.DeliveryInFlight}, nil},
		} {
			got := listAllDeliveries(t, s, tc.f)
			if diff := cmp.Diff(tc.want, ids(got), cmpEmpty); diff != "" {
				t.Errorf("ListDeliveries(%+v) over pages of 2 (-want +got):\n%s", tc.f, diff)
			}
		}
		_, _, err := s.ListDeliveries(ctx, store.DeliveryFilter{}, store.Page{Cursor: "!!"})
		wantCode(t, "ListDeliveries with a malformed cursor", err, store.CodeInvalid)
	}},
}
