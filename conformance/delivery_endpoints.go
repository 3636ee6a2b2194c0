package conformance

import (
	"context"
	"slices"
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

// testSecret2 and testSecret3 are the secrets rotations install.
const (
	testSecret2 = "whsec_c2Vjb25kLXNlY3JldC1mb3ItdGVzdHM="
	testSecret3 = "whsec_dGhpcmQtc2VjcmV0LWZvci10ZXN0cw=="
)

// endpointChangeTests: UpdateEndpoint, RotateEndpointSecret and
// DeleteEndpoint.
var endpointChangeTests = []deliveryTest{
	{"Endpoint/Update", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		e := newEndpoint(t, s, event.PaymentSucceeded)
		clock.Advance(time.Minute)
		url := "https://other.example:8443/hooks?v=2"
		want := e
		want.URL = url
		wantUpdated(t, s, e.ID, "url", store.EndpointUpdate{URL: &url}, want)
		types := []event.Type{event.EntitlementGranted, event.PaymentFailed}
		want.EventTypes = slices.Clone(types)
		wantUpdated(t, s, e.ID, "eventTypes", store.EndpointUpdate{EventTypes: &types}, want)
		types[0] = event.PaymentRefunded // the store kept its own copy
		all := []event.Type{}
		if _, err := s.UpdateEndpoint(ctx, e.ID, store.EndpointUpdate{EventTypes: &all}); err != nil {
			t.Fatalf("UpdateEndpoint(eventTypes []): %v", err)
		}
		got, err := s.GetEndpoint(ctx, e.ID)
		want.EventTypes = []event.Type{}
		if err != nil {
			t.Fatalf("GetEndpoint: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GetEndpoint after updates (-want +got):\n%s", diff)
		}
		if !got.Subscribes(event.EntitlementDepleted) {
			t.Errorf("endpoint with no event types: Subscribes(entitlement.depleted) = false, want true")
		}
		if got, err := s.UpdateEndpoint(ctx, e.ID, store.EndpointUpdate{}); err != nil || !cmp.Equal(want, got) {
			t.Errorf("UpdateEndpoint(nothing) = %+v, %v; want the endpoint unchanged", got, err)
		}
		_, err = s.UpdateEndpoint(ctx, "missing", store.EndpointUpdate{URL: &url})
		wantCode(t, "UpdateEndpoint(missing)", err, store.CodeNotFound)
	}},
	{"Endpoint/UpdateEnables", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		e := newEndpoint(t, s)
		clock.Advance(time.Minute)
		if _, err := s.DisableEndpoint(ctx, e.ID, "the receiver answered 410 Gone"); err != nil {
			t.Fatalf("DisableEndpoint: %v", err)
		}
		url := "https://new.example/hooks"
		want := e
		want.URL = url
		got := wantUpdated(t, s, e.ID, "enable", store.EndpointUpdate{URL: &url, Enable: true}, want)
		if !got.Subscribes(event.PaymentSucceeded) {
			t.Errorf("enabled endpoint: Subscribes(payment.succeeded) = false, want true")
		}
		if got, err := s.UpdateEndpoint(ctx, e.ID, store.EndpointUpdate{Enable: true}); err != nil || !cmp.Equal(want, got) {
			t.Errorf("UpdateEndpoint(enable) of an enabled endpoint = %+v, %v; want it unchanged", got, err)
		}
	}},
	{"Endpoint/UpdateInvalidChangesNothing", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		ctx := context.Background()
		e := newEndpoint(t, s, event.PaymentSucceeded)
		ftp, port, zero := "ftp://a.example/x", "https://a.example:65536/x", "https://a.example:0/x"
		bad := []event.Type{event.PaymentFailed, "nope"}
		for _, tc := range []struct {
			name  string
			u     store.EndpointUpdate
			field string
		}{
			{"FTP", store.EndpointUpdate{URL: &ftp, Enable: true}, "url"},
			{"PortOutOfRange", store.EndpointUpdate{URL: &port}, "url"},
			{"PortZero", store.EndpointUpdate{URL: &zero}, "url"},
			{"UnknownType", store.EndpointUpdate{EventTypes: &bad}, "eventTypes[1]"},
		} {
			_, err := s.UpdateEndpoint(ctx, e.ID, tc.u)
			wantCode(t, "UpdateEndpoint "+tc.name, err, store.CodeInvalid)
			if err != nil && !strings.Contains(err.Error(), tc.field) {
				t.Errorf("UpdateEndpoint %s: error %q does not name field %q", tc.name, err, tc.field)
			}
		}
		got, err := s.GetEndpoint(ctx, e.ID)
		if err != nil {
			t.Fatalf("GetEndpoint: %v", err)
		}
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("endpoint after refused updates (-want +got):\n%s", diff)
		}
	}},
	{"Endpoint/RotateSecret", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		ctx := context.Background()
		e := newEndpoint(t, s)
		grace := clock.Now().Add(24 * time.Hour)
		got, err := s.RotateEndpointSecret(ctx, e.ID, testSecret2, grace)
		if err != nil {
			t.Fatalf("RotateEndpointSecret: %v", err)
		}
		want := e
		want.Secret, want.PreviousSecret, want.PreviousSecretExpiresAt = testSecret2, TestSecret, &grace
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("RotateEndpointSecret (-want +got):\n%s", diff)
		}
		if got, err := s.GetEndpoint(ctx, e.ID); err != nil || !cmp.Equal(want, got) {
			t.Errorf("GetEndpoint after the rotation = %+v, %v; want %+v", got, err, want)
		}
		if diff := cmp.Diff([]string{testSecret2, TestSecret}, got.SigningSecrets(grace.Add(-time.Second))); diff != "" {
			t.Errorf("SigningSecrets within the grace period (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{testSecret2}, got.SigningSecrets(grace)); diff != "" {
			t.Errorf("SigningSecrets once the grace period is over (-want +got):\n%s", diff)
		}

		// A second rotation within the grace period drops the first secret.
		grace2 := clock.Advance(time.Hour).Add(time.Hour)
		got, err = s.RotateEndpointSecret(ctx, e.ID, testSecret3, grace2)
		if err != nil {
			t.Fatalf("RotateEndpointSecret #2: %v", err)
		}
		if got.Secret != testSecret3 || got.PreviousSecret != testSecret2 || got.PreviousSecretExpiresAt == nil ||
			!got.PreviousSecretExpiresAt.Equal(grace2) {
			t.Errorf("second rotation = secret %q, previous %q until %v; want %q, %q until %v",
				got.Secret, got.PreviousSecret, got.PreviousSecretExpiresAt, testSecret3, testSecret2, grace2)
		}
		// No grace: the replaced secret is dropped at once.
		got, err = s.RotateEndpointSecret(ctx, e.ID, TestSecret, time.Time{})
		if err != nil {
			t.Fatalf("RotateEndpointSecret without grace: %v", err)
		}
		if got.Secret != TestSecret || got.PreviousSecret != "" || got.PreviousSecretExpiresAt != nil {
			t.Errorf("rotation without grace = secret %q, previous %q until %v; want %q and no previous secret",
				got.Secret, got.PreviousSecret, got.PreviousSecretExpiresAt, TestSecret)
		}

		_, err = s.RotateEndpointSecret(ctx, e.ID, "secret", grace)
		wantCode(t, "RotateEndpointSecret(bad secret)", err, store.CodeInvalid)
		if err != nil && !strings.Contains(err.Error(), "secret") {
			t.Errorf("RotateEndpointSecret(bad secret): error %q does not name field secret", err)
		}
		if got, err := s.GetEndpoint(ctx, e.ID); err != nil || got.Secret != TestSecret {
			t.Errorf("after a refused rotation: secret %q, %v; want %q", got.Secret, err, TestSecret)
		}
		_, err = s.RotateEndpointSecret(ctx, "missing", testSecret2, grace)
		wantCode(t, "RotateEndpointSecret(missing)", err, store.CodeNotFound)
	}},
	{"Endpoint/CreateOwnsItsState", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		// CreateEndpoint ignores a disabled state and a previous secret
		// the caller passes: a new endpoint is enabled and has one secret.
		at := Start.Add(time.Hour)
		e, err := s.CreateEndpoint(context.Background(), store.Endpoint{
			ID: "fresh", URL: "https://a.example", Secret: TestSecret,
			PreviousSecret: testSecret2, PreviousSecretExpiresAt: &at,
			Disabled: true, DisabledReason: "x", DisabledAt: &at,
		})
		if err != nil {
			t.Fatalf("CreateEndpoint: %v", err)
		}
		want := store.Endpoint{ID: "fresh", URL: "https://a.example", EventTypes: []event.Type{}, Secret: TestSecret, CreatedAt: Start}
		if diff := cmp.Diff(want, e); diff != "" {
			t.Errorf("CreateEndpoint (-want +got):\n%s", diff)
		}
	}},
	{"Endpoint/DeleteKeepsDeliveries", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		ctx := context.Background()
		gone, kept := newEndpoint(t, s), newEndpoint(t, s)
		d := enqueue(t, s, newDelivery(gone.ID, event.PaymentSucceeded))
		if err := s.DeleteEndpoint(ctx, gone.ID); err != nil {
			t.Fatalf("DeleteEndpoint: %v", err)
		}
		_, err := s.GetEndpoint(ctx, gone.ID)
		wantCode(t, "GetEndpoint(deleted)", err, store.CodeNotFound)
		wantCode(t, "DeleteEndpoint(deleted)", s.DeleteEndpoint(ctx, gone.ID), store.CodeNotFound)
		wantCode(t, "DeleteEndpoint(missing)", s.DeleteEndpoint(ctx, "missing"), store.CodeNotFound)
		_, err = s.UpdateEndpoint(ctx, gone.ID, store.EndpointUpdate{Enable: true})
		wantCode(t, "UpdateEndpoint(deleted)", err, store.CodeNotFound)
		items, _, err := s.ListEndpoints(ctx, store.Page{})
		if err != nil {
			t.Fatalf("ListEndpoints: %v", err)
		}
		if len(items) != 1 || items[0].ID != kept.ID {
			t.Errorf("ListEndpoints after the delete = %d endpoints, want only %s", len(items), kept.ID)
		}
		// The delivery stays pending: the sender, not the store, finishes it.
		got, err := s.GetDelivery(ctx, d.ID)
		if err != nil || got.Status != store.DeliveryPending || got.EndpointID != gone.ID {
			t.Errorf("delivery to the deleted endpoint = %s to %s, %v; want it kept, pending", got.Status, got.EndpointID, err)
		}
	}},
}

// wantUpdated applies u (what names it) to endpoint id and fails unless
// the endpoint answered is want.
func wantUpdated(t *testing.T, s store.DeliveryStore, id, what string, u store.EndpointUpdate, want store.Endpoint) store.Endpoint {
	t.Helper()
	got, err := s.UpdateEndpoint(context.Background(), id, u)
	if err != nil {
		t.Fatalf("UpdateEndpoint(%s): %v", what, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("UpdateEndpoint(%s) (-want +got):\n%s", what, diff)
	}
	return got
}
