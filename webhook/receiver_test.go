package webhook_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/conformance"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/memory"
	"github.com/stipend-mcp/stipend/webhook"
)

// request is one request a receiver got.
type request struct {
	Header http.Header
	Body   []byte
}

// receiver is a webhook endpoint on 127.0.0.1 that records every request and
// answers with respond (200 when nil). n counts requests from 0.
type receiver struct {
	t       *testing.T
	srv     *httptest.Server
	respond func(n int, w http.ResponseWriter, r *http.Request)

	mu   sync.Mutex
	reqs []request
	got  chan struct{}
}

func newReceiver(t *testing.T, respond func(n int, w http.ResponseWriter, r *http.Request)) *receiver {
	t.Helper()
	rc := &receiver{t: t, respond: respond, got: make(chan struct{}, 1024)}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rc.mu.Lock()
		n := len(rc.reqs)
		rc.reqs = append(rc.reqs, request{Header: r.Header.Clone(), Body: body})
		rc.mu.Unlock()
		select {
		case rc.got <- struct{}{}:
		default:
		}
		if rc.respond != nil {
			rc.respond(n, w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(rc.srv.Close)
	return rc
}

// firstThen answers the first request with status first and every later one
// with then.
func firstThen(first, then int) func(n int, w http.ResponseWriter, r *http.Request) {
	return func(n int, w http.ResponseWriter, _ *http.Request) {
		if n == 0 {
			w.WriteHeader(first)
			return
		}
		w.WriteHeader(then)
	}
}

func (rc *receiver) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]request(nil), rc.reqs...)
}

// env is a memory store on a test clock with one endpoint at a receiver.
type env struct {
	store    *memory.Store
	clock    *conformance.Clock
	endpoint store.Endpoint
}

func newEnv(t *testing.T, url string, types ...event.Type) *env {
	t.Helper()
	clock := conformance.NewClock()
	s := memory.New(memory.WithClock(clock.Now))
	ep, err := s.CreateEndpoint(context.Background(), store.Endpoint{
		ID: uuid.NewString(), URL: url, EventTypes: types, Secret: webhook.NewSecret(),
	})
	if err != nil {
		t.Fatalf("CreateEndpoint: %v", err)
	}
	return &env{store: s, clock: clock, endpoint: ep}
}

// enqueue stores a delivery of a new payment.succeeded event to the endpoint.
func (e *env) enqueue(t *testing.T) store.Delivery {
	t.Helper()
	ev := event.Event{ID: uuid.NewString(), Type: event.PaymentSucceeded, OccurredAt: e.clock.Now(), Data: []byte(`{"paymentId":"p1"}`)}
	body, err := webhook.Payload(&ev)
	if err != nil {
		t.Fatalf("Payload: %v", err)
	}
	d, _, err := e.store.EnqueueDelivery(context.Background(), store.Delivery{
		ID: uuid.NewString(), Key: webhook.DeliveryKey(ev.ID, e.endpoint.ID), EndpointID: e.endpoint.ID,
		EventID: ev.ID, EventType: ev.Type, Payload: body,
	})
	if err != nil {
		t.Fatalf("EnqueueDelivery: %v", err)
	}
	return d
}

// dispatcher returns a dispatcher on the env's store and clock that may
// send to loopback, with cfg's other settings.
func (e *env) dispatcher(cfg webhook.Config) *webhook.Dispatcher {
	cfg.AllowPrivate = true
	if cfg.Now == nil {
		cfg.Now = e.clock.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.AttemptTimeout == 0 {
		cfg.AttemptTimeout = 30 * time.Second
	}
	return webhook.NewDispatcher(e.store, nil, cfg)
}

// once runs one DispatchOnce and checks how many deliveries it sent.
func once(t *testing.T, d *webhook.Dispatcher, want int) {
	t.Helper()
	n, err := d.DispatchOnce(context.Background())
	if err != nil {
		t.Fatalf("DispatchOnce: %v", err)
	}
	if n != want {
		t.Fatalf("DispatchOnce sent %d deliveries, want %d", n, want)
	}
}

func (e *env) delivery(t *testing.T, id string) store.Delivery {
	t.Helper()
	d, err := e.store.GetDelivery(context.Background(), id)
	if err != nil {
		t.Fatalf("GetDelivery: %v", err)
	}
	return d
}
