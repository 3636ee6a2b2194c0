package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/stripepay"
)

// stripeClient returns the client of the configured Stripe secret key
// (--stripe-secret-key-file or STIPEND_STRIPE_SECRET_KEY), or nil without
// one: then Stipend makes no Stripe objects and runs no sweep.
func (m *Main) stripeClient() (*stripepay.Client, error) {
	c := m.Config
	key := c.StripeSecretKey
	if c.StripeSecretKeyFile != "" {
		k, err := readPassword(c.StripeSecretKeyFile)
		if err != nil {
			return nil, fmt.Errorf("--stripe-secret-key-file: %w", err)
		}
		key = k
	}
	if key == "" {
		return nil, nil
	}
	client, err := stripepay.New(stripepay.Config{SecretKey: key, URL: c.StripeAPIURL, Issuer: c.Issuer})
	if err != nil {
		return nil, err
	}
	m.Logger.Info("stripe API access configured", "url", c.StripeAPIURL)
	return client, nil
}

// stripeSweep returns the reconciliation sweep of st at Stripe, which also
// checks the accounts with auto top-up.
func (m *Main) stripeSweep(st backend, client *stripepay.Client, signer *receipt.Keyring) *stripepay.Sweep {
	return &stripepay.Sweep{
		Store: st, Stripe: client, Age: m.Config.StripeSweepAge, Logger: m.Logger,
		Applier: m.stripeApplier(st, signer), TopUps: m.topUpsOf(st, client, signer),
	}
}

// stripeApplier moves st's payments to the state of their Stripe objects.
func (m *Main) stripeApplier(st backend, signer *receipt.Keyring) *stripepay.Applier {
	return &stripepay.Applier{Payments: st, Issuer: m.Config.Issuer, Sign: signer.Sign, Logger: m.Logger}
}

// topUpsOf returns this instance's auto top-up (one, so the API's trigger
// and the sweep share what it remembers), or nil without Stripe.
func (m *Main) topUpsOf(st backend, client *stripepay.Client, signer *receipt.Keyring) *stripepay.TopUps {
	if client == nil {
		return nil
	}
	if m.topUps == nil {
		m.topUps = &stripepay.TopUps{Store: st, Stripe: client, Applier: m.stripeApplier(st, signer), Logger: m.Logger}
	}
	return m.topUps
}

// startTopUps checks, in the background until Close, the accounts a charge
// brought below their auto top-up threshold.
func (m *Main) startTopUps() {
	if m.topUps == nil {
		return
	}
	m.goLoop(func(ctx context.Context) { m.topUps.Run(ctx, time.Minute) })
}

// startStripeSweep reconciles pending Stripe payments in the background
// until Close. Every instance may run one: the store's transitions make
// one grant, whoever applies it.
func (m *Main) startStripeSweep(st backend, client *stripepay.Client, signer *receipt.Keyring) {
	switch {
	case client == nil:
		return
	case m.Config.StripeSweepInterval == 0:
		m.Logger.Info("stripe sweep off (--stripe-sweep-interval 0)")
		return
	}
	sweep := m.stripeSweep(st, client, signer)
	// The instances take turns: one sweep per interval between them all.
	if c, ok := st.(store.Claimer); ok {
		sweep.Claims, sweep.Owner = c, uuid.NewString()
	}
	m.goLoop(func(ctx context.Context) { sweep.Run(ctx, m.Config.StripeSweepInterval) })
}

// stripeCmd runs `stipend stripe reconcile`: one sweep of the pending Stripe
// payments, as the service's background sweep makes, for an operator who
// runs none or cannot wait for it.
func stripeCmd(ctx context.Context, args []string, env map[string]string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "reconcile" {
		return groupUsage("stripe", stripeCommands, args, stdout, stderr)
	}
	c := cmdStripeReconcile
	cfg, _, envErr := readSettings(nil, env)
	fs := newFlagSet(c)
	// serve's settings of the store, Stripe and receipts, from the
	// environment as serve reads them, or from these flags.
	for _, name := range []string{"store", "firestore-project", "firestore-database", "collection-prefix", "postgres-url",
		"postgres-password-file", "stripe-secret-key-file", "stripe-api-url", "signing-key-file", "issuer"} {
		s := settingNamed(name)
		def := s.def
		if v, ok := env[s.env]; ok {
			def = v
		}
		if err := s.bind(fs, &cfg, name, def, s.help+" ("+s.env+")"); err != nil && envErr == nil {
			envErr = fmt.Errorf("%s=%q: %w", s.env, def, err)
		}
	}
	fs.DurationVar(&cfg.StripeSweepAge, "age", cfg.StripeSweepAge, "read payments pending for longer than this (STIPEND_STRIPE_SWEEP_AGE, as the service's --stripe-sweep-age)")
	if code, ok := parseFlagsOnly(c, fs, args[1:], stdout, stderr, envErr); !ok {
		return code
	}
	switch {
	case cfg.Store == StoreMemory:
		return usageError(c, fs, stderr, fmt.Errorf("--store: the memory store lives in its server's process; reconcile a firestore or postgres store"))
	case len(cfg.SigningKeyFiles) == 0:
		return usageError(c, fs, stderr, fmt.Errorf("--signing-key-file is required: completed payments get receipts signed with the service's key"))
	case cfg.StripeSweepAge <= 0:
		return usageError(c, fs, stderr, fmt.Errorf("--age must be positive"))
	}
	m := &Main{Config: cfg, Stdout: stdout, Stderr: stderr}
	m.Logger = newLogger(stderr, cfg.LogLevel)
	defer m.Close()
	if err := m.reconcile(ctx, stdout); err != nil {
		fmt.Fprintf(stderr, "stipend %s: %v\n", c.name, err)
		return 1
	}
	return 0
}

// reconcile opens the store and Stripe and sweeps once.
func (m *Main) reconcile(ctx context.Context, stdout io.Writer) error {
	db, err := m.openDatabase(ctx)
	if err != nil {
		return err
	}
	st := m.openStore(ctx, db)
	client, err := m.stripeClient()
	if err != nil {
		return err
	}
	if client == nil {
		return fmt.Errorf("no Stripe secret key: set --stripe-secret-key-file or STIPEND_STRIPE_SECRET_KEY")
	}
	signer, err := m.signer()
	if err != nil {
		return err
	}
	began := time.Now()
	r, err := m.stripeSweep(st, client, signer).Once(ctx)
	fmt.Fprintf(stdout, "stripe reconcile: %s in %s\n", r, time.Since(began).Round(time.Millisecond))
	if err == nil && r.Failed > 0 {
		err = fmt.Errorf("%d payments could not be reconciled (see the log); run it again", r.Failed)
	}
	return err
}
