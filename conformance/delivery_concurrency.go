package conformance

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// deliveryConcurrencyTests: the cases of RunDeliveryStoreConcurrencyTests.
var deliveryConcurrencyTests = []deliveryTest{
	{"EnqueueOneKey", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		d := newDelivery("ep1", event.PaymentSucceeded)
		const n = 20
		var (
			created = make([]bool, n)
			got     = make([]string, n)
			errs    = make([]error, n)
		)
		enqueue := func(i int) {
			c := d
			c.ID = uuid.NewString()
			stored, ok, err := s.EnqueueDelivery(context.Background(), c)
			created[i], got[i], errs[i] = ok, stored.ID, err
		}
		together(n, enqueue)
		retryUnavailable(t, "EnqueueDelivery", errs, enqueue)
		count := countTrue(t, "EnqueueDelivery", errs, created)
		for i := range n {
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
	{"Claim4Workers", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		claimExactlyOnce(t, s, clock, 4, 12)
	}},
	{"Claim20Workers", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		claimExactlyOnce(t, s, clock, 20, 30)
	}},
	{"InboundOneEvent", func(t *testing.T, s store.DeliveryStore, _ *Clock) {
		const n = 20
		news := make([]bool, n)
		errs := make([]error, n)
		record := func(i int) {
			news[i], _, errs[i] = s.RecordInboundEvent(context.Background(), "stripe", "evt_race")
		}
		together(n, record)
		retryUnavailable(t, "RecordInboundEvent", errs, record)
		if count := countTrue(t, "RecordInboundEvent", errs, news); count != 1 {
			t.Errorf("%d concurrent records of one event: %d new, want 1", n, count)
		}
	}},
	{"RotateOneEndpoint", func(t *testing.T, s store.DeliveryStore, clock *Clock) {
		// Each rotation reads the secret it replaces and writes the new one
		// in one atomic step, so the rotations form one chain: every secret
		// is replaced at most once, and only the last is never replaced.
		e := newEndpoint(t, s)
		const n = 6
		secrets := make([]string, n)
		for i := range secrets {
			secrets[i] = fmt.Sprintf("whsec_concurrent-rotation-%02d", i)
		}
		got := make([]store.Endpoint, n)
		errs := make([]error, n)
		grace := clock.Now().Add(time.Hour)
		rotate := func(i int) {
			got[i], errs[i] = s.RotateEndpointSecret(context.Background(), e.ID, secrets[i], grace)
		}
		together(n, rotate)
		retryUnavailable(t, "RotateEndpointSecret", errs, rotate)
		if t.Failed() {
			return
		}
		replaced := map[string]string{} // previous secret → the rotation that replaced it
		for i := range n {
			if got[i].Secret != secrets[i] {
				t.Errorf("RotateEndpointSecret #%d returned secret %q, want %q", i, got[i].Secret, secrets[i])
			}
			prev := got[i].PreviousSecret
			if other, ok := replaced[prev]; ok {
				t.Errorf("secret %q replaced by rotations %s and %s, want one (a lost update)", prev, other, secrets[i])
			}
			replaced[prev] = secrets[i]
		}
		final, err := s.GetEndpoint(context.Background(), e.ID)
		if err != nil {
			t.Fatalf("GetEndpoint: %v", err)
		}
		if _, ok := replaced[TestSecret]; !ok {
			t.Errorf("no rotation replaced the first secret")
		}
		if _, ok := replaced[final.Secret]; ok {
			t.Errorf("the final secret %q was replaced by %s, want it current", final.Secret, replaced[final.Secret])
		}
		if final.PreviousSecret == "" || replaced[final.PreviousSecret] != final.Secret {
			t.Errorf("final endpoint: secret %q, previous %q; want the previous one replaced by the final one", final.Secret, final.PreviousSecret)
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
