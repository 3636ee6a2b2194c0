package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

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
