package conformance

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// endpointTests: CreateEndpoint, GetEndpoint, DisableEndpoint and
// ListEndpoints.
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
		items, _ := allPages(t, "ListEndpoints", 2, 7, func(p store.Page) ([]store.Endpoint, string, error) {
			return s.ListEndpoints(context.Background(), p)
		})
		var got []string
		for _, e := range items {
			got = append(got, e.ID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ListEndpoints over pages (-want +got):\n%s", diff)
		}
	}},
}
