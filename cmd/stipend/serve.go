package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/holdsweep"
	"github.com/stipend-mcp/stipend/problem"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
	"github.com/stipend-mcp/stipend/stripepay"
	"github.com/stipend-mcp/stipend/webhook"
)

// Main is the `stipend serve` program: it wires the configuration to a store,
// the API keys, the receipt signer and the HTTP API. Tests start the real
// program with it on 127.0.0.1:0.
type Main struct {
	// Config is set by ParseFlags (or directly by a test) before Run.
	Config Config

	// Stdout receives the human-readable development banner; Stderr the
	// structured JSON logs.
	Stdout, Stderr io.Writer

	// HTTPServer serves the API; Run sets its Handler.
	HTTPServer *http.Server

	// Logger is built by Run from Config.LogLevel, writing JSON to Stderr.
	Logger *slog.Logger

	// DevKeys holds the raw development API keys when Run made them.
	DevKeys *DevKeys

	failpoints failpoints // set by ParseFlags; empty outside the crash test's build
	ln         net.Listener
	closers    []func() error // released by Close, last first
	// storeStats are the Firestore store's counters (nil on the other
	// stores), exported as metrics (firestore_metrics.go).
	storeStats func() fsstore.Stats
	serveErr   chan error // receives the HTTP server's exit
	// The background loops (the webhook dispatcher, the hold sweep, the
	// Stripe sweep, auto top-up) run on loopsCtx; Close cancels it and
	// waits for every loop before it closes the store.
	loopsCtx  context.Context
	stopLoops context.CancelFunc
	loops     sync.WaitGroup
	topUps    *stripepay.TopUps // auto top-up of this instance (stripe.go), nil without Stripe
}

// MaxHeaderBytes bounds the request line and headers `stipend serve`
// reads (net/http allows 4 KiB more before it answers 431).
const MaxHeaderBytes = 64 << 10

// NewMain returns a Main writing to the process's stdout and stderr.
func NewMain() *Main {
	return &Main{
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		HTTPServer: &http.Server{
			ReadHeaderTimeout: 10 * time.Second,
			// Stipend's own headers are small (a key, an Idempotency-Key of
			// at most 255 bytes, trace ids); net/http answers a request whose
			// headers are larger with its own 431 (docs/api.md).
			MaxHeaderBytes: MaxHeaderBytes,
			// Bodies are small (64 KiB); a request's store calls are
			// bounded by --store-timeout.
			ReadTimeout:  30 * time.Second,
			WriteTimeout: time.Minute,
			IdleTimeout:  2 * time.Minute,
		},
	}
}

// ParseFlags sets m.Config from the command line args and the environment env.
func (m *Main) ParseFlags(args []string, env map[string]string) error {
	c, err := ParseConfig(args, env)
	if err != nil {
		return err
	}
	m.Config = c
	m.failpoints = readFailpoints(env)
	return nil
}

// Run opens the store, loads (or, in development, makes) the API and signing
// keys, starts listening and serves in the background. It returns once the
// listener is open, so Addr is valid; call Close to stop.
func (m *Main) Run(ctx context.Context) error {
	c := m.Config
	m.Logger = newLogger(m.Stderr, c.LogLevel)
	m.serveErr = make(chan error, 1)

	// One database connection serves the store and the ledger (a Firestore
	// client or a PostgreSQL pool); Close closes it after the HTTP server
	// has drained.
	db, err := m.openDatabase(ctx)
	if err != nil {
		return err
	}
	st := m.openStore(ctx, db)
	keys, err := m.apiKeys()
	if err != nil {
		return err
	}
	signer, err := m.signer()
	if err != nil {
		return err
	}
	stripeClient, err := m.stripeClient()
	if err != nil {
		return err
	}
	// The API adds its own metrics to the runtime and process ones.
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if m.storeStats != nil {
		reg.MustRegister(firestoreMetrics(m.storeStats)...)
	}
	srv, err := api.New(api.Config{
		Store:        st,
		Keys:         keys,
		Signer:       signer,
		Issuer:       c.Issuer,
		Logger:       m.Logger,
		Registry:     reg,
		CORSOrigins:  c.CORSOrigins,
		Development:  c.Development(),
		Now:          time.Now,
		StoreTimeout: c.StoreTimeout,
		Webhooks:     &api.WebhookConfig{StripeSecret: c.StripeWebhookSecret, AllowPrivate: c.WebhookAllowPrivate},
		Stripe:       stripeClient,
		TopUps:       m.topUpsOf(st, stripeClient, signer),

		PublicURL:            c.PublicURL,
		PortalFrameAncestors: c.PortalFrameAncestors,
	})
	if err != nil {
		return fmt.Errorf("api: %w", err)
	}
	m.useLedger(srv, db)
	m.HTTPServer.Handler = srv.Handler()
	m.HTTPServer.ErrorLog = slog.NewLogLogger(m.Logger.Handler(), slog.LevelWarn)

	ln, err := net.Listen("tcp", c.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", c.Addr, err)
	}
	if err := m.writeDevKeys(); err != nil {
		ln.Close()
		return err
	}
	// net/http's own refusals (a bad escape in the path, a malformed
	// request line) go out as problem documents too.
	ln = problem.Listener(ln)
	m.ln = ln
	m.Logger.Info("listening", "addr", m.Addr(), "env", c.Env, "store", c.Store, "version", version())
	if c.Development() {
		m.printBanner(signer.KeyID())
	}
	go func() { m.serveErr <- m.HTTPServer.Serve(ln) }()
	m.loopsCtx, m.stopLoops = context.WithCancel(context.Background())
	m.startDispatcher(st)
	m.startHoldSweep(st)
	m.startStripeSweep(st, stripeClient, signer)
	m.startTopUps()
	return nil
}

// startHoldSweep ends expired holds of idle entitlements in the background
// until Close.
func (m *Main) startHoldSweep(st backend) {
	if m.Config.HoldSweepInterval == 0 {
		m.Logger.Info("hold sweep off (--hold-sweep-interval 0)")
		return
	}
	m.goLoop(func(ctx context.Context) { holdsweep.Run(ctx, st, m.Config.HoldSweepInterval, m.Logger) })
}

// goLoop runs loop in the background until Close, which waits for it.
func (m *Main) goLoop(loop func(ctx context.Context)) {
	m.loops.Go(func() { loop(m.loopsCtx) })
}

// startDispatcher sends webhook deliveries in the background until Close.
// Every instance may run one: deliveries are claimed one worker at a time.
func (m *Main) startDispatcher(st backend) {
	if m.Config.WebhookConcurrency == 0 {
		m.Logger.Info("webhook dispatcher off (--webhook-concurrency 0)")
		return
	}
	d := webhook.NewDispatcher(st, st, webhook.Config{
		Concurrency:  m.Config.WebhookConcurrency,
		AllowPrivate: m.Config.WebhookAllowPrivate,
		Logger:       m.Logger,
	})
	m.goLoop(func(ctx context.Context) { _ = d.Run(ctx) })
	m.Logger.Info("webhook dispatcher started", "worker", d.WorkerID(), "concurrency", m.Config.WebhookConcurrency)
}

// Addr returns the address the server listens on (with the real port when
// Config.Addr asked for port 0), or "" before Run.
func (m *Main) Addr() string {
	if m.ln == nil {
		return ""
	}
	return m.ln.Addr().String()
}

// URL returns the server's base URL, such as http://127.0.0.1:43117.
func (m *Main) URL() string { return "http://" + m.Addr() }

// Close stops accepting connections, waits up to Config.ShutdownTimeout for
// in-flight requests to finish, then releases the store. It returns an error
// when requests had to be cut off or a resource failed to close.
func (m *Main) Close() error {
	var errs []error
	// One deadline for the whole shutdown: the HTTP drain and the webhook
	// attempts run out the same clock, so the process is done within the
	// shutdown timeout (Cloud Run's grace period is 10 s).
	deadline := time.Now().Add(m.Config.ShutdownTimeout)
	// Stop the loops now: the dispatcher claims nothing more (attempts
	// already started finish), a sweep cut short ends nothing twice (the
	// next instance's finishes it), a top-up check not made is made by the
	// next sweep.
	if m.stopLoops != nil {
		m.stopLoops()
	}
	if m.ln != nil {
		ctx, cancel := context.WithDeadline(context.Background(), deadline)
		err := m.HTTPServer.Shutdown(ctx)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Errorf("shutdown: in-flight requests cut off after %s: %w", m.Config.ShutdownTimeout, err))
			_ = m.HTTPServer.Close()
		}
		if err := <-m.serveErr; err != nil && !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
		m.ln = nil
	}
	if m.stopLoops != nil {
		// The loops use the store: it closes only once they are done.
		// Webhook attempts already started finish (each bounded by its
		// timeout); one still running after the deadline is left to another
		// worker, which re-claims it once its claim expires.
		if !waitUntil(&m.loops, deadline) {
			m.Logger.Warn("background work still running at the shutdown deadline; closing the store under it (webhook attempts are retried by another worker after their claim expires)")
		}
		m.stopLoops = nil
	}
	for i := len(m.closers) - 1; i >= 0; i-- {
		if err := m.closers[i](); err != nil {
			errs = append(errs, err)
		}
	}
	m.closers = nil
	return errors.Join(errs...)
}

// waitUntil waits for wg until deadline and reports whether it finished.
func waitUntil(wg *sync.WaitGroup, deadline time.Time) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done: // finished already: no warning, whatever the clock says
		return true
	default:
	}
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
