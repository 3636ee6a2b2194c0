package conformance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// NewDeliveryStore returns a fresh, empty delivery store that reads time from now.
type NewDeliveryStore func(t *testing.T, now func() time.Time) store.DeliveryStore

// deliveryTest is one named case of the delivery suite.
type deliveryTest = suiteCase[store.DeliveryStore]

// RunDeliveryStoreTests runs the contract of store.DeliveryStore: endpoints,
// idempotent enqueue, the delivery state machine, claims and their expiry,
// listing, inbound event records, and the concurrency guarantees (20
// concurrent enqueues of one key, 4 and 20 workers claiming at once, 20
// concurrent inbound records of one event).
func RunDeliveryStoreTests(t *testing.T, newStore NewDeliveryStore) {
	t.Helper()
	runTable(t, newStore, endpointTests, enqueueTests, claimTests, listDeliveryTests,
		inboundTests, deliveryConcurrencyTests)
}

// TestSecret is a valid endpoint secret for tests.
const TestSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"

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

func enqueue(t *testing.T, s store.DeliveryStore, d store.Delivery) store.Delivery {
	t.Helper()
	got, created, err := s.EnqueueDelivery(context.Background(), d)
	if err != nil || !created {
		t.Fatalf("EnqueueDelivery(%s) = created %v, %v; want created", d.Key, created, err)
	}
	return got
}

func claim(t *testing.T, s store.DeliveryStore, now time.Time, limit int, ttl time.Duration, worker string) []store.Delivery {
	t.Helper()
	got, err := s.ClaimDueDeliveries(context.Background(), now, limit, ttl, worker)
	if err != nil {
		t.Fatalf("ClaimDueDeliveries(%s, %d): %v", now, limit, err)
	}
	return got
}

func ids(ds []store.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.ID
	}
	return out
}

var endpointTests = []deliveryTest{
	{"Endpoint/CreateGetDisable", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		e := newEndpoint(t, s, event.PaymentSucceeded)
		want := store.Endpoint{ID: e.ID, URL: "https://example.com/hooks", EventTypes: []event.Type{event.PaymentSucceeded},
			Secret: TestSecret, CreatedAt: Start}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("CreateEndpoint (-want +got):\n%s", diff)
		}
		got, err := s.GetEndpoint(ctx, e.ID)
		if err != nil {
			t.Fatalf("GetEndpoint: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetEndpoint (-want +got):\n%s", diff)
		}
		at := clock.Advance(time.Minute)
		for i := range 2 { // the second call changes nothing
			got, err = s.DisableEndpoint(ctx, e.ID, "gone")
			if err != nil {
				t.Fatalf("DisableEndpoint #%d: %v", i+1, err)
			}
			clock.Advance(time.Minute)
		}
		want.Disabled, want.DisabledReason, want.DisabledAt = true, "gone", &at
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("DisableEndpoint (-want +got):\n%s", diff)
		}
		if got.Subscribes(event.PaymentSucceeded) {
			t.Errorf("disabled endpoint Subscribes(payment.succeeded) = true, want false")
		}
		_, err = s.CreateEndpoint(ctx, store.Endpoint{ID: e.ID, URL: e.URL, Secret: TestSecret})
		wantCode(t, "CreateEndpoint with an existing ID", err, store.CodeConflict)
		_, err = s.GetEndpoint(ctx, "missing")
		wantCode(t, "GetEndpoint(missing)", err, store.CodeNotFound)
		_, err = s.DisableEndpoint(ctx, "missing", "x")
		wantCode(t, "DisableEndpoint(missing)", err, store.CodeNotFound)
	}},
	{"Endpoint/Invalid", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		for _, tc := range []struct {
			name  string
			e     store.Endpoint
			field string
		}{
			{"NoID", store.Endpoint{URL: "https://a.example", Secret: TestSecret}, "id"},
			{"RelativeURL", store.Endpoint{ID: "e", URL: "/hooks", Secret: TestSecret}, "url"},
			{"FTP", store.Endpoint{ID: "e", URL: "ftp://a.example/x", Secret: TestSecret}, "url"},
			{"UnknownType", store.Endpoint{ID: "e", URL: "https://a.example", Secret: TestSecret, EventTypes: []event.Type{"nope"}}, "eventTypes[0]"},
			{"BadSecret", store.Endpoint{ID: "e", URL: "https://a.example", Secret: "secret"}, "secret"},
		} {
			_, err := s.CreateEndpoint(context.Background(), tc.e)
			wantCode(t, "CreateEndpoint "+tc.name, err, store.CodeInvalid)
			if err != nil && !strings.Contains(err.Error(), tc.field) {
				t.Errorf("CreateEndpoint %s: error %q does not name field %q", tc.name, err, tc.field)
			}
		}
	}},
	{"Endpoint/ListPages", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		var want []string
		for range 5 {
			want = append(want, newEndpoint(t, s).ID)
			clock.Advance(time.Second)
		}
		var got []string
		cursor := ""
		for pages := 0; ; pages++ {
			items, next, err := s.ListEndpoints(context.Background(), store.Page{Limit: 2, Cursor: cursor})
			if err != nil {
				t.Fatalf("ListEndpoints page %d: %v", pages, err)
			}
			for _, e := range items {
				got = append(got, e.ID)
			}
			if next == "" {
				break
			}
			if pages > 5 {
				t.Fatalf("ListEndpoints: too many pages")
			}
			cursor = next
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListEndpoints over pages (-want +got):\n%s", diff)
		}
	}},
}

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
		got, err := s.GetDelivery(context.Background(), d.ID)
		if err != nil {
			t.Fatalf("GetDelivery: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetDelivery (-want +got):\n%s", diff)
		}
		if !bytes.Equal(got.Payload, d.Payload) {
			t.Errorf("GetDelivery payload = %q, want the exact bytes %q", got.Payload, d.Payload)
		}
		_, err = s.GetDelivery(context.Background(), "missing")
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
	{"Claim/FailedReturnsToPendingLater", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
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
	{"Claim/DeferredGivesTheAttemptBack", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
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
	{"Claim/TerminalAndManualRetry", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
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
	{"Claim/InvalidResult", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		d := enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded))
		c := claim(t, s, clock.Now(), 1, time.Minute, "w1")[0]
		_, err := s.FinishDelivery(context.Background(), d.ID, c.ClaimToken, store.AttemptResult{Status: store.DeliveryPending})
		wantCode(t, "FinishDelivery(pending)", err, store.CodeInvalid)
	}},
}

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

// cmpEmpty treats nil and empty slices as equal.
var cmpEmpty = cmp.FilterValues(func(a, b []string) bool { return len(a) == 0 && len(b) == 0 }, cmp.Ignore())

func listAllDeliveries(t *testing.T, s store.DeliveryStore, f store.DeliveryFilter) []store.Delivery {
	t.Helper()
	var out []store.Delivery
	cursor := ""
	for pages := 0; ; pages++ {
		items, next, err := s.ListDeliveries(context.Background(), f, store.Page{Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatalf("ListDeliveries(%+v) page %d: %v", f, pages, err)
		}
		out = append(out, items...)
		if next == "" {
			return out
		}
		if pages > 10 {
			t.Fatalf("ListDeliveries(%+v): too many pages", f)
		}
		cursor = next
	}
}

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

var deliveryConcurrencyTests = []deliveryTest{
	{"Concurrent/EnqueueOneKey", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		const n = 20
		var (
			created = make([]bool, n)
			got     = make([]string, n)
			errs    = make([]error, n)
		)
		together(n, func(i int) {
			c := d
			c.ID = uuid.NewString()
			stored, ok, err := s.EnqueueDelivery(context.Background(), c)
			created[i], got[i], errs[i] = ok, stored.ID, err
		})
		count := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("EnqueueDelivery #%d: %v", i, errs[i])
			}
			if created[i] {
				count++
			}
			if got[i] != got[0] {
				t.Errorf("EnqueueDelivery #%d returned delivery %s, #0 returned %s; want one delivery", i, got[i], got[0])
			}
		}
		if count != 1 {
			t.Errorf("%d concurrent enqueues of one key: %d created, want 1", n, count)
		}
		if all := listAllDeliveries(t, s, store.DeliveryFilter{}); len(all) != 1 {
			t.Errorf("deliveries stored = %d, want 1", len(all))
		}
	}},
	{"Concurrent/Claim4Workers", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		claimExactlyOnce(t, s, clock, 4, 12)
	}},
	{"Concurrent/Claim20Workers", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		claimExactlyOnce(t, s, clock, 20, 30)
	}},
	{"Concurrent/InboundOneEvent", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		const n = 20
		news := make([]bool, n)
		errs := make([]error, n)
		together(n, func(i int) {
			news[i], _, errs[i] = s.RecordInboundEvent(context.Background(), "stripe", "evt_race")
		})
		count := 0
		for i := range n {
			if errs[i] != nil {
				t.Fatalf("RecordInboundEvent #%d: %v", i, errs[i])
			}
			if news[i] {
				count++
			}
		}
		if count != 1 {
			t.Errorf("%d concurrent records of one event: %d new, want 1", n, count)
		}
	}},
}

// claimExactlyOnce enqueues n due deliveries and lets workers claim them all
// at once (claim TTL far longer than the test): every delivery must be
// claimed by exactly one worker, at attempt 1.
func claimExactlyOnce(t *testing.T, s store.DeliveryStore, clock *Clock, workers, n int) {
	t.Helper()
	want := make(map[string]bool, n)
	for range n {
		want[enqueue(t, s, newDelivery("ep1", event.PaymentSucceeded)).ID] = true
	}
	now := clock.Advance(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	claimed := make([][]store.Delivery, workers)
	errs := make([]error, workers)
	remaining := make(chan struct{}, n)
	for range n {
		remaining <- struct{}{}
	}
	together(workers, func(w int) {
		worker := fmt.Sprintf("w%d", w)
		// Claim until every delivery is claimed by someone: a claim may come
		// back short while rows are contended.
		for len(remaining) > 0 && ctx.Err() == nil {
			got, err := s.ClaimDueDeliveries(ctx, now, 3, time.Hour, worker)
			if err != nil {
				errs[w] = err
				return
			}
			claimed[w] = append(claimed[w], got...)
			for range got {
				select {
				case <-remaining:
				default:
				}
			}
		}
	})
	if ctx.Err() != nil {
		t.Fatalf("workers did not claim all %d deliveries in time", n)
	}
	seen := make(map[string]string, n)
	for w, ds := range claimed {
		if errs[w] != nil {
			t.Fatalf("worker w%d: ClaimDueDeliveries: %v", w, errs[w])
		}
		for _, d := range ds {
			if prev, ok := seen[d.ID]; ok {
				t.Errorf("delivery %s claimed by %s and w%d, want exactly one claim", d.ID, prev, w)
			}
			seen[d.ID] = fmt.Sprintf("w%d", w)
			if d.Attempts != 1 || d.ClaimedBy != fmt.Sprintf("w%d", w) {
				t.Errorf("claimed delivery %s: attempts %d by %s, want 1 by w%d", d.ID, d.Attempts, d.ClaimedBy, w)
			}
		}
	}
	for id := range want {
		if _, ok := seen[id]; !ok {
			t.Errorf("delivery %s was never claimed", id)
		}
	}
	if len(seen) != n {
		t.Errorf("claimed %d distinct deliveries, want %d", len(seen), n)
	}
}
