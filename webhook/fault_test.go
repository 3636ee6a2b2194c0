package webhook_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/internal/syncbuf"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/webhook"
)

// The child dispatcher's settings: the claim TTL is short so the test does
// not wait long for the killed dispatcher's claims to expire.
const (
	childEnv         = "STIPEND_WEBHOOK_CHILD_PREFIX"
	childClaimTTL    = 3 * time.Second
	childTimeout     = 2 * time.Second
	childConcurrency = 8
)

// TestDispatcherChild is not a test: it is the dispatcher process that
// TestDispatcher_SurvivesSIGKILL starts (re-executing the test binary) and
// kills. It runs a dispatcher on the emulator store named by the
// environment until it is killed, or for two minutes at most.
func TestDispatcherChild(t *testing.T) {
	prefix := os.Getenv(childEnv)
	if prefix == "" {
		t.Skip("helper process of TestDispatcher_SurvivesSIGKILL")
	}
	s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	d := webhook.NewDispatcher(s, nil, webhook.Config{
		Concurrency: childConcurrency, AttemptTimeout: childTimeout, ClaimTTL: childClaimTTL,
		PollInterval: 50 * time.Millisecond, AllowPrivate: true,
	})
	_ = d.Run(ctx)
}

// faultReceiver records, per event, the webhook-ids it was delivered with.
type faultReceiver struct {
	mu       sync.Mutex
	byEvent  map[string][]string
	requests int
	arrived  chan struct{}
}

func (f *faultReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var body struct {
		ID string `json:"id"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.byEvent[body.ID] = append(f.byEvent[body.ID], r.Header.Get(webhook.HeaderID))
	f.requests++
	f.mu.Unlock()
	select {
	case f.arrived <- struct{}{}:
	default:
	}
	// A slow receiver keeps several deliveries in flight at any moment.
	time.Sleep(300 * time.Millisecond)
	w.WriteHeader(http.StatusNoContent)
}

// startChild starts a dispatcher process on the store with prefix.
func startChild(t *testing.T, prefix string) (*exec.Cmd, *syncbuf.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestDispatcherChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+prefix)
	out := &syncbuf.Buffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the dispatcher process: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, out
}

// TestDispatcher_SurvivesSIGKILL kills a dispatcher process with SIGKILL
// while deliveries are in flight, starts another, and checks that every
// event still reaches the receiver, each delivery succeeds, and repeated
// deliveries of an event carry one webhook-id.
func TestDispatcher_SurvivesSIGKILL(t *testing.T) {
	client := emulator.Client(t)
	prefix := emulator.Prefix(t)
	s := fsstore.New(client, fsstore.WithCollectionPrefix(prefix))
	ctx := context.Background()

	rc := &faultReceiver{byEvent: map[string][]string{}, arrived: make(chan struct{}, 1024)}
	srv := newLoopbackServer(t, rc)
	ep, err := s.CreateEndpoint(ctx, store.Endpoint{ID: uuid.NewString(), URL: srv, Secret: webhook.NewSecret()})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	const n = 40
	events := make([]string, n)
	for i := range events {
		ev := event.Event{ID: uuid.NewString(), Type: event.PaymentSucceeded, OccurredAt: time.Now(), Data: []byte(`{"n":` + fmt.Sprint(i) + `}`)}
		events[i] = ev.ID
		body, err := webhook.Payload(&ev)
		if err != nil {
			t.Fatalf("Payload: %v", err)
		}
		if _, _, err := s.EnqueueDelivery(ctx, store.Delivery{ID: uuid.NewString(), Key: webhook.DeliveryKey(ev.ID, ep.ID),
			EndpointID: ep.ID, EventID: ev.ID, EventType: ev.Type, Payload: body}); err != nil {
			t.Fatalf("EnqueueDelivery: %v", err)
		}
	}

	first, out1 := startChild(t, prefix)
	waitRequests(t, rc, 10, out1)
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	_ = first.Wait()
	inFlight := countDeliveries(t, s, store.DeliveryInFlight)
	if inFlight == 0 {
		t.Errorf("no delivery was in flight when the dispatcher was killed; the test proves nothing")
	}
	t.Logf("killed the dispatcher after %d requests, with %d deliveries in flight", rc.count(), inFlight)

	_, out2 := startChild(t, prefix)
	deadline := time.Now().Add(2 * time.Minute)
	for countDeliveries(t, s, store.DeliverySucceeded) < n {
		if time.Now().After(deadline) {
			t.Fatalf("after the restart, %d of %d deliveries succeeded; dispatcher output:\n%s", countDeliveries(t, s, store.DeliverySucceeded), n, out2)
		}
		select {
		case <-rc.arrived:
		case <-time.After(500 * time.Millisecond):
		}
	}

	rc.mu.Lock()
	defer rc.mu.Unlock()
	dups := 0
	for _, id := range events {
		ids := rc.byEvent[id]
		if len(ids) == 0 {
			t.Errorf("event %s never reached the receiver", id)
			continue
		}
		dups += len(ids) - 1
		for _, wid := range ids[1:] {
			if wid != ids[0] {
				t.Errorf("event %s delivered with webhook-ids %v, want one", id, ids)
				break
			}
		}
	}
	t.Logf("%d requests for %d events (%d duplicates, all with the first webhook-id)", rc.requests, n, dups)
}

func (f *faultReceiver) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests
}

func waitRequests(t *testing.T, rc *faultReceiver, want int, out *syncbuf.Buffer) {
	t.Helper()
	timeout := time.After(time.Minute)
	for rc.count() < want {
		select {
		case <-rc.arrived:
		case <-timeout:
			t.Fatalf("the dispatcher sent %d requests in a minute, want %d; its output:\n%s", rc.count(), want, out)
		}
	}
}

func countDeliveries(t *testing.T, s store.DeliveryStore, st store.DeliveryStatus) int {
	t.Helper()
	total, cursor := 0, ""
	for {
		items, next, err := s.ListDeliveries(context.Background(), store.DeliveryFilter{Status: st}, store.Page{Cursor: cursor})
		if err != nil {
			t.Fatalf("ListDeliveries(%s): %v", st, err)
		}
		total += len(items)
		if next == "" {
			return total
		}
		cursor = next
	}
}

// newLoopbackServer serves h on 127.0.0.1 and returns its URL.
func newLoopbackServer(t *testing.T, h http.Handler) string {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
