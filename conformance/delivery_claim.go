package conformance

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

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
