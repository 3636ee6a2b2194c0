package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/webhook"
)

// BenchmarkDispatcher measures end-to-end deliveries per second: b.N
// deliveries are enqueued (untimed), then one dispatcher sends them all to a
// receiver on 127.0.0.1 that answers 204 at once; the time runs until the
// last delivery is recorded as succeeded.
//
//	go test -run '^$' -bench Dispatcher -benchtime 2000x ./webhook/
//	scripts/test -run '^$' -bench Dispatcher/firestore -benchtime 500x ./webhook/
func BenchmarkDispatcher(b *testing.B) {
	for _, conc := range []int{4, 16} {
		b.Run("memory/concurrency="+itoa(conc), func(b *testing.B) {
			benchDispatcher(b, memory.New(), conc)
		})
	}
	for _, conc := range []int{4, 16} {
		b.Run("firestore/concurrency="+itoa(conc), func(b *testing.B) {
			if os.Getenv("FIRESTORE_EMULATOR_HOST") == "" {
				b.Skip("no emulator: run with scripts/test")
			}
			benchDispatcher(b, fsstore.New(emulator.Client(b), fsstore.WithCollectionPrefix(emulator.Prefix(b))), conc)
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func benchDispatcher(b *testing.B, s store.DeliveryStore, concurrency int) {
	ctx := context.Background()
	var received atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		received.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	ep, err := s.CreateEndpoint(ctx, store.Endpoint{ID: uuid.NewString(), URL: srv.URL, Secret: webhook.NewSecret()})
	if err != nil {
		b.Fatalf("CreateEndpoint: %v", err)
	}
	for i := 0; i < b.N; i++ {
		ev := event.Event{ID: uuid.NewString(), Type: event.PaymentSucceeded, OccurredAt: time.Now(), Data: []byte(`{"paymentId":"p"}`)}
		body, _ := webhook.Payload(&ev)
		if _, _, err := s.EnqueueDelivery(ctx, store.Delivery{ID: uuid.NewString(), Key: webhook.DeliveryKey(ev.ID, ep.ID),
			EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type, Payload: body}); err != nil {
			b.Fatalf("EnqueueDelivery: %v", err)
		}
	}
	finished := make(chan struct{})
	counting := &countingStore{DeliveryStore: s, want: int64(b.N), done: finished}
	runCtx, cancel := context.WithCancel(ctx)
	d := webhook.NewDispatcher(counting, nil, webhook.Config{
		Concurrency: concurrency, AllowPrivate: true, PollInterval: 5 * time.Millisecond,
	})
	b.ResetTimer()
	start := time.Now()
	stopped := make(chan struct{})
	go func() { _ = d.Run(runCtx); close(stopped) }()
	select {
	case <-finished:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d deliveries finished", counting.n.Load(), b.N)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	<-stopped
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	if got := received.Load(); got < int64(b.N) {
		b.Errorf("receiver got %d requests, want at least %d", got, b.N)
	}
}

// countingStore closes done once want deliveries have been finished as succeeded.
type countingStore struct {
	store.DeliveryStore
	want int64
	n    atomic.Int64
	done chan struct{}
}

func (c *countingStore) FinishDelivery(ctx context.Context, id, token string, r store.AttemptResult) (store.Delivery, error) {
	d, err := c.DeliveryStore.FinishDelivery(ctx, id, token, r)
	if err == nil && r.Status == store.DeliverySucceeded && c.n.Add(1) == c.want {
		close(c.done)
	}
	return d, err
}
