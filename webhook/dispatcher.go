package webhook

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// Config tunes a Dispatcher. Zero fields take the documented defaults.
type Config struct {
	// WorkerID names this dispatcher in claims (default: host, pid and a
	// random suffix).
	WorkerID string
	// Concurrency is how many deliveries are sent at once (default 4).
	Concurrency int
	// AttemptTimeout bounds one request, from dial to the end of the
	// response (default 10 s).
	AttemptTimeout time.Duration
	// ClaimTTL is how long a claim protects a delivery; after it, another
	// worker may take the delivery over (default 2 × AttemptTimeout + 30 s,
	// so a live sender always finishes first).
	ClaimTTL time.Duration
	// PollInterval is the wait between polls when nothing is due (default 1 s).
	PollInterval time.Duration
	// Schedule is the wait before each retry (default DefaultSchedule); once
	// it is spent, a failed attempt makes the delivery dead.
	Schedule []time.Duration
	// Jitter spreads each wait by ±Jitter of itself (default 0.2; negative: none).
	Jitter float64
	// MaxRetryAfter caps how far a receiver's Retry-After may push the next
	// attempt (default 24 h).
	MaxRetryAfter time.Duration
	// AllowPrivate lets endpoints on loopback and private addresses receive.
	AllowPrivate bool
	// EndpointCooldown is how long an endpoint whose request got no answer
	// (a timeout, a refused or broken connection) is left alone: its claimed
	// deliveries are deferred (store.AttemptResult.Deferred) without a
	// request and without spending an attempt, so a hanging receiver cannot
	// hold every slot and delay the others (default max(30 s,
	// AttemptTimeout)).
	EndpointCooldown time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Logger receives one line per failed attempt (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) defaults() {
	if c.WorkerID == "" {
		host, _ := os.Hostname()
		var b [3]byte
		_, _ = rand.Read(b[:])
		c.WorkerID = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 4
	}
	if c.AttemptTimeout <= 0 {
		c.AttemptTimeout = 10 * time.Second
	}
	if c.ClaimTTL <= 0 {
		c.ClaimTTL = 2*c.AttemptTimeout + 30*time.Second
	}
	if c.EndpointCooldown <= 0 {
		c.EndpointCooldown = max(30*time.Second, c.AttemptTimeout)
	}
	if c.PollInterval <= 0 {
		c.PollInterval = time.Second
	}
	if c.Schedule == nil {
		c.Schedule = DefaultSchedule
	}
	if c.Jitter == 0 {
		c.Jitter = 0.2
	}
	if c.MaxRetryAfter <= 0 {
		c.MaxRetryAfter = 24 * time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Dispatcher sends due deliveries. Any number of dispatchers, in one
// process or many, may share a store: each delivery is claimed by one of
// them at a time.
type Dispatcher struct {
	store  store.DeliveryStore
	outbox Outbox
	cfg    Config
	sender *sender

	mu sync.Mutex
	// cooling holds, per endpoint ID, until when its deliveries are
	// deferred (see Config.EndpointCooldown). Each dispatcher learns it on
	// its own.
	cooling map[string]time.Time
}

// NewDispatcher returns a dispatcher on deliveries. With outbox set, every
// poll first fans pending outbox events out into deliveries (FanOut).
func NewDispatcher(deliveries store.DeliveryStore, outbox Outbox, cfg Config) *Dispatcher {
	cfg.defaults()
	return &Dispatcher{
		store: deliveries, outbox: outbox, cfg: cfg,
		sender:  &sender{client: newClient(cfg.AllowPrivate), timeout: cfg.AttemptTimeout, now: cfg.Now},
		cooling: make(map[string]time.Time),
	}
}

// WorkerID returns the name this dispatcher claims deliveries under.
func (d *Dispatcher) WorkerID() string { return d.cfg.WorkerID }

// Run polls and sends until ctx ends, with at most Concurrency requests in
// flight, then waits for the requests in flight (each bounded by
// AttemptTimeout) and returns nil. Store errors are logged and retried at
// the next poll; they never stop Run.
func (d *Dispatcher) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, d.cfg.Concurrency)
	freed := make(chan struct{}, d.cfg.Concurrency)
	timer := time.NewTimer(0)
	defer timer.Stop()
	// Claims come in batches: a freed slot is refilled at once only when at
	// least half of the slots are free (or at the next poll), so each claim
	// query serves several deliveries under load.
	batch := (d.cfg.Concurrency + 1) / 2
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-freed:
			if d.cfg.Concurrency-len(slots) < batch {
				continue // the poll timer is still armed
			}
			timer.Stop()
		}
		if d.outbox != nil {
			if _, err := FanOut(ctx, d.outbox, d.store); err != nil && ctx.Err() == nil {
				d.cfg.Logger.Error("webhook fan-out failed", "err", err)
			}
		}
		free := d.cfg.Concurrency - len(slots)
		var claimed []store.Delivery
		if free > 0 {
			var err error
			claimed, err = d.store.ClaimDueDeliveries(ctx, d.cfg.Now(), free, d.cfg.ClaimTTL, d.cfg.WorkerID)
			if err != nil && ctx.Err() == nil {
				d.cfg.Logger.Error("claiming webhook deliveries failed", "err", err)
			}
		}
		for _, del := range claimed {
			slots <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				// A started attempt runs to its end (bounded by the attempt
				// timeout) even when Run is stopped, so its result is stored.
				d.Attempt(context.WithoutCancel(ctx), del)
				<-slots
				select {
				case freed <- struct{}{}:
				default:
				}
			}()
		}
		// A full batch suggests more is due: poll again as soon as a slot frees.
		wait := d.cfg.PollInterval
		if free > 0 && len(claimed) == free {
			wait = 0
		}
		timer.Reset(wait)
	}
}

// DispatchOnce fans out (with an outbox), claims up to Concurrency due
// deliveries, sends them concurrently and returns how many it sent, when
// all have finished. It suits tests and one-shot tools; servers use Run.
func (d *Dispatcher) DispatchOnce(ctx context.Context) (int, error) {
	if d.outbox != nil {
		if _, err := FanOut(ctx, d.outbox, d.store); err != nil {
			return 0, err
		}
	}
	claimed, err := d.store.ClaimDueDeliveries(ctx, d.cfg.Now(), d.cfg.Concurrency, d.cfg.ClaimTTL, d.cfg.WorkerID)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	for _, del := range claimed {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d.Attempt(ctx, del)
		}()
	}
	wg.Wait()
	return len(claimed), nil
}

// Attempt sends one claimed delivery and records the result: succeeded on
// a 2xx; on 410 the endpoint is disabled and the delivery failed; otherwise
// (another status, a redirect, a timeout, a refused address) the delivery
// is retried after the next wait of the schedule, or later if the receiver
// asked so with Retry-After, or dead once the schedule is spent. A delivery
// whose endpoint is gone or disabled fails without a request.
func (d *Dispatcher) Attempt(ctx context.Context, del store.Delivery) store.AttemptResult {
	r := d.attempt(ctx, &del)
	if _, err := d.store.FinishDelivery(ctx, del.ID, del.ClaimToken, r); err != nil {
		// A Conflict means the claim expired and another worker owns the
		// delivery now; it sends it again (at least once, same webhook-id).
		d.cfg.Logger.Warn("recording a webhook attempt failed", "delivery", del.ID, "err", err)
	}
	return r
}

func (d *Dispatcher) attempt(ctx context.Context, del *store.Delivery) store.AttemptResult {
	if until, ok := d.coolingUntil(del.EndpointID); ok {
		// Spread the deferred deliveries a little, so they do not all come
		// due in the same poll.
		return store.AttemptResult{Status: store.DeliveryFailed, Deferred: true,
			RetryAt: until.Add(jittered(time.Second, 1) / 2)}
	}
	ep, err := d.store.GetEndpoint(ctx, del.EndpointID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.AttemptResult{Status: store.DeliveryFailed, Error: "webhook endpoint no longer exists"}
	case err != nil:
		return d.retry(del, sent{err: fmt.Errorf("reading the endpoint: %w", err)})
	case ep.Disabled:
		return store.AttemptResult{Status: store.DeliveryFailed, Error: "webhook endpoint is disabled"}
	}
	res := d.sender.send(ctx, &ep, del)
	switch {
	case res.err == nil && res.status >= 200 && res.status < 300:
		return store.AttemptResult{Status: store.DeliverySucceeded, StatusCode: res.status}
	case res.err == nil && res.status == 410:
		if _, err := d.store.DisableEndpoint(ctx, ep.ID, "the receiver answered 410 Gone"); err != nil {
			d.cfg.Logger.Error("disabling a gone webhook endpoint failed", "endpoint", ep.ID, "err", err)
		}
		return store.AttemptResult{Status: store.DeliveryFailed, StatusCode: res.status, Error: "410 Gone: endpoint disabled"}
	}
	d.cfg.Logger.Info("webhook attempt failed", "delivery", del.ID, "endpoint", ep.ID,
		"attempt", del.Attempts, "status", res.status, "err", res.err)
	if res.err != nil && res.status == 0 && !errors.As(res.err, new(*RefusedError)) {
		d.coolDown(ep.ID) // no answer at all: leave the endpoint alone for a while
	}
	return d.retry(del, res)
}

// coolingUntil reports whether the endpoint is cooling down, and until when.
func (d *Dispatcher) coolingUntil(endpointID string) (time.Time, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	until, ok := d.cooling[endpointID]
	if ok && !d.cfg.Now().Before(until) {
		delete(d.cooling, endpointID)
		return time.Time{}, false
	}
	return until, ok
}

// coolDown starts (or extends) the endpoint's cooldown.
func (d *Dispatcher) coolDown(endpointID string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cooling[endpointID] = d.cfg.Now().Add(d.cfg.EndpointCooldown)
}

// retry plans the next attempt after a failed one, or declares the delivery dead.
func (d *Dispatcher) retry(del *store.Delivery, res sent) store.AttemptResult {
	r := store.AttemptResult{Status: store.DeliveryFailed, StatusCode: res.status, Error: res.describe()}
	if del.Attempts > len(d.cfg.Schedule) {
		r.Status = store.DeliveryDead
		return r
	}
	now := d.cfg.Now()
	wait := jittered(d.cfg.Schedule[max(del.Attempts, 1)-1], d.cfg.Jitter)
	if res.retryAfter > wait {
		wait = min(res.retryAfter, d.cfg.MaxRetryAfter)
	}
	r.RetryAt = now.Add(wait)
	return r
}

// Retry sends a failed or dead delivery again as soon as a dispatcher polls
// (store.DeliveryStore.RetryDelivery): the manual retry of an operator.
func Retry(ctx context.Context, deliveries store.DeliveryStore, id string) (store.Delivery, error) {
	return deliveries.RetryDelivery(ctx, id)
}
