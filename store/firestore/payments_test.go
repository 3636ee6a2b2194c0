package firestore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// completion is the change every completion in these tests makes.
var completion = store.PaymentChange{Issuer: "test", Sign: func(r receipt.Receipt) (string, error) { return "jws." + r.ID, nil }}

// instances returns n stores on one collection prefix, each on a client
// (a connection) of its own, as n instances of Stipend on one database are.
func instances(t *testing.T, n int) []store.EntitlementStore {
	t.Helper()
	emulator.Host(t)
	prefix := emulator.Prefix(t)
	out := make([]store.EntitlementStore, n)
	for i := range out {
		client, err := firestore.NewClient(context.Background(), emulator.ProjectID)
		if err != nil {
			t.Fatalf("firestore.NewClient: %v", err)
		}
		t.Cleanup(func() { client.Close() })
		out[i] = fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
	}
	return out
}

// TestStore_CompletePaymentInWaves sends 20 CompletePayment calls for one
// payment in two waves, 13 and then 7 about 400 ms later (what an outside
// test saw livelock for 42 s), spread over one instance and over several:
// every call must succeed with the one receipt and the one entitlement.
// Within an instance the calls share one transaction; between instances
// the emulator holds contending transactions for about 2 s before it lets
// one commit. In the Deadline case every call has the 2 s deadline of
// `stipend serve --store-timeout` and a caller retries an unavailable
// answer after 1 s (Retry-After), as clients of the API do. The times are
// logged, not asserted.
func TestStore_CompletePaymentInWaves(t *testing.T) {
	for _, tc := range []struct {
		name      string
		instances int
		deadline  time.Duration // 0: none, and no retries
	}{
		{"Instances1", 1, 0}, {"Instances3", 3, 0}, {"Instances8", 8, 0}, {"Instances3Deadline", 3, 2 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ss := instances(t, tc.instances)
			res, err := ss[0].CreatePayment(context.Background(), payment.Payment{
				AgentID: "agent-waves", Amount: usd(700), Provider: payment.ProviderManual,
				Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
				IdempotencyKey: "waves", Fingerprint: "fp-waves",
			})
			if err != nil {
				t.Fatalf("CreatePayment: %v", err)
			}
			id, n := res.Payment.ID, tc.instances
			const first, second = 13, 7
			results := make([]store.Completion, first+second)
			errs := make([]error, first+second)
			var mu sync.Mutex
			var firstOK time.Duration
			calls := 0
			start := time.Now()
			complete := func(i int) {
				for {
					ctx, cancel := context.Background(), context.CancelFunc(func() {})
					if tc.deadline > 0 {
						ctx, cancel = context.WithTimeout(ctx, tc.deadline)
					}
					results[i], errs[i] = ss[i%n].CompletePayment(ctx, id, completion)
					cancel()
					mu.Lock()
					calls++
					if errs[i] == nil && firstOK == 0 {
						firstOK = time.Since(start)
					}
					mu.Unlock()
					if tc.deadline == 0 || store.CodeOf(errs[i]) != store.CodeUnavailable {
						return
					}
					time.Sleep(time.Second) // Retry-After: 1
				}
			}
			var wg sync.WaitGroup
			for i := range first {
				wg.Go(func() { complete(i) })
			}
			time.Sleep(400 * time.Millisecond) // the second wave's arrival, as the outside test sent it
			for i := first; i < first+second; i++ {
				wg.Go(func() { complete(i) })
			}
			wg.Wait()
			t.Logf("%d CompletePayment callers in two waves on %d instance(s): first success after %v, all after %v, %d calls",
				first+second, n, firstOK.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), calls)
			receiptID, fresh := "", 0
			for i, c := range results {
				if errs[i] != nil {
					t.Errorf("CompletePayment #%d (instance %d): %v, want success", i, i%n, errs[i])
					continue
				}
				if receiptID == "" {
					receiptID = c.Receipt.ID
				}
				if c.Receipt.ID != receiptID || len(c.Entitlements) != 1 {
					t.Errorf("CompletePayment #%d: receipt %q, %d entitlements; want receipt %s and one entitlement", i, c.Receipt.ID, len(c.Entitlements), receiptID)
				}
				if !c.Replayed {
					fresh++
				}
			}
			// The call that completed the payment answers not Replayed,
			// unless its caller left before the answer (then its retry
			// replays it).
			if fresh > 1 || (fresh == 0 && calls == first+second) {
				t.Errorf("%d answers not Replayed, want 1: the one call that completed the payment", fresh)
			}
			receipts, _, err := ss[0].ListReceipts(context.Background(), "agent-waves", store.Page{})
			if err != nil || len(receipts) != 1 {
				t.Errorf("ListReceipts = %d receipts, %v; want 1", len(receipts), err)
			}
		})
	}
}

// TestStore_CompletePaymentCallerLeaves: a caller whose context ends while
// it waits gets an Unavailable error marked Uncertain, and a later call
// completes (or replays) the payment.
func TestStore_CompletePaymentCallerLeaves(t *testing.T) {
	s := instances(t, 1)[0]
	res, err := s.CreatePayment(context.Background(), payment.Payment{
		AgentID: "agent-leaves", Amount: usd(700), Provider: payment.ProviderManual,
		Grant:          payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "search"}},
		IdempotencyKey: "leaves", Fingerprint: "fp-leaves",
	})
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.CompletePayment(ctx, res.Payment.ID, completion)
	if store.CodeOf(err) != store.CodeUnavailable || !store.IsUncertain(err) {
		t.Errorf("CompletePayment(cancelled context) = %v; want an Uncertain Unavailable error", err)
	}
	c, err := s.CompletePayment(context.Background(), res.Payment.ID, completion)
	if err != nil || c.Receipt.ID == "" || len(c.Entitlements) != 1 {
		t.Errorf("CompletePayment after = receipt %q, %d entitlements, %v; want the receipt and one entitlement", c.Receipt.ID, len(c.Entitlements), err)
	}
}
