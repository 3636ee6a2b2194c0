package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

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
