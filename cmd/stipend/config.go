package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"
)

// The environments.
const (
	EnvDevelopment = "development"
	EnvProduction  = "production"
)

// The stores.
const (
	StoreMemory    = "memory"
	StoreFirestore = "firestore"
	StorePostgres  = "postgres"
)

// Config is everything `stipend serve` can be told, from flags and STIPEND_*
// environment variables (a flag wins over its variable), the emulator
// address from FIRESTORE_EMULATOR_HOST and the PostgreSQL password from
// STIPEND_POSTGRES_PASSWORD.
type Config struct {
	Addr                  string
	Env                   string
	Store                 string
	FirestoreProject      string // "" = detect from the environment
	FirestoreDatabase     string
	FirestoreEmulatorHost string // FIRESTORE_EMULATOR_HOST (no flag): host:port of an emulator; "" = Firestore itself
	CollectionPrefix      string
	PostgresURL           string // connection URL or keyword/value string; the password is better kept out of it
	PostgresPasswordFile  string
	PostgresPassword      string // STIPEND_POSTGRES_PASSWORD (no flag, so never in a process listing); never logged
	PostgresMaxConns      int
	PostgresMigrate       bool          // apply the embedded migrations at start
	PostgresLockTimeout   time.Duration // lock_timeout of every connection; 0 leaves it to the server
	PostgresIdleTxTimeout time.Duration // idle_in_transaction_session_timeout of every connection; 0 leaves it to the server
	APIKeysFile           string
	SigningKeyFiles       []string // the first signs; all verify
	StripeWebhookSecret   string
	StripeSecretKeyFile   string
	StripeSecretKey       string        // STIPEND_STRIPE_SECRET_KEY (no flag, so never in a process listing); never logged
	StripeAPIURL          string        // "" = Stripe's own
	StripeSweepInterval   time.Duration // how often pending Stripe payments are reconciled; 0 runs no sweep
	StripeSweepAge        time.Duration // how long a Stripe payment stays pending before the sweep reads it
	WebhookAllowPrivate   bool
	WebhookConcurrency    int           // deliveries sent at once; 0 runs no dispatcher
	HoldSweepInterval     time.Duration // how often expired holds are ended; 0 runs no sweep
	CORSOrigins           []string
	PublicURL             string   // where clients reach the service; the origin of portal session URLs
	PortalFrameAncestors  []string // who may frame /portal (CSP frame-ancestors)
	Issuer                string
	ShutdownTimeout       time.Duration
	StoreTimeout          time.Duration // bounds each request's store calls
	LedgerRetention       time.Duration // how long completed Idempotency-Key results replay
	LogLevel              slog.Level
	DevKeysOut            string
}

// Development reports whether c runs in development mode.
func (c Config) Development() bool { return c.Env == EnvDevelopment }

// setting is one configuration setting: its flag, environment variable,
// default and help. The table below is the single source for flags, their
// environment equivalents, the usage text and docs/configuration.md.
type setting struct {
	flag, env, def, help string
	// bind registers the flag on fs, writing into c, with the default def.
	bind func(fs *flag.FlagSet, c *Config, name, def, help string) error
}

// settings lists every serve setting in the order of the usage text.
var settings = []setting{
	{"addr", "STIPEND_ADDR", "127.0.0.1:8080", "listen address (host:port); when neither this nor the variable is set, PORT (as on Cloud Run) gives \":$PORT\"", stringVar(func(c *Config) *string { return &c.Addr })},
	{"env", "STIPEND_ENV", EnvDevelopment, "development or production (production refuses the memory store and needs key files)", stringVar(func(c *Config) *string { return &c.Env })},
	{"store", "STIPEND_STORE", StoreMemory, "memory, firestore or postgres", stringVar(func(c *Config) *string { return &c.Store })},
	{"firestore-project", "STIPEND_FIRESTORE_PROJECT", "", "Google Cloud project of the Firestore database (empty: detected)", stringVar(func(c *Config) *string { return &c.FirestoreProject })},
	{"firestore-database", "STIPEND_FIRESTORE_DATABASE", "(default)", "Firestore database ID", stringVar(func(c *Config) *string { return &c.FirestoreDatabase })},
	{"collection-prefix", "STIPEND_COLLECTION_PREFIX", "", "prefix of every Firestore collection name", stringVar(func(c *Config) *string { return &c.CollectionPrefix })},
	{"postgres-url", "STIPEND_POSTGRES_URL", "", "PostgreSQL connection URL (postgres://USER@HOST:5432/DB?sslmode=verify-full; search_path=SCHEMA picks the schema); keep the password out of it", stringVar(func(c *Config) *string { return &c.PostgresURL })},
	{"postgres-password-file", "STIPEND_POSTGRES_PASSWORD_FILE", "", "file holding the PostgreSQL password (its first line); or set STIPEND_POSTGRES_PASSWORD", stringVar(func(c *Config) *string { return &c.PostgresPasswordFile })},
	{"postgres-max-conns", "STIPEND_POSTGRES_MAX_CONNS", "10", "connections this instance opens to PostgreSQL at most (1–1000)", intVar(func(c *Config) *int { return &c.PostgresMaxConns })},
	{"postgres-migrate", "STIPEND_POSTGRES_MIGRATE", "true", "apply the embedded schema migrations at start; false refuses to start on a schema that lacks one (run `stipend migrate`)", boolVar(func(c *Config) *bool { return &c.PostgresMigrate })},
	{"postgres-lock-timeout", "STIPEND_POSTGRES_LOCK_TIMEOUT", "5s", "PostgreSQL lock_timeout of Stipend's connections: how long a statement waits for a row another transaction locks before the call answers 503 (retry with the same key); 0 leaves the server's", durationVar(func(c *Config) *time.Duration { return &c.PostgresLockTimeout })},
	{"postgres-idle-in-transaction-timeout", "STIPEND_POSTGRES_IDLE_IN_TRANSACTION_TIMEOUT", "10s", "PostgreSQL idle_in_transaction_session_timeout of Stipend's connections: how long a transaction may sit idle before the server ends it and frees its locks (an instance frozen mid-transaction); 0 leaves the server's", durationVar(func(c *Config) *time.Duration { return &c.PostgresIdleTxTimeout })},
	{"api-keys-file", "STIPEND_API_KEYS_FILE", "", "JSON file of hashed API keys (see `stipend keys api`)", stringVar(func(c *Config) *string { return &c.APIKeysFile })},
	{"signing-key-file", "STIPEND_SIGNING_KEY_FILE", "", "receipt signing key file; repeat the flag (or comma-separate the variable): the first signs, all verify", listVar(func(c *Config) *[]string { return &c.SigningKeyFiles })},
	{"stripe-webhook-secret", "STIPEND_STRIPE_WEBHOOK_SECRET", "", "Stripe webhook signing secret (whsec_…); without it the Stripe route refuses every event", stringVar(func(c *Config) *string { return &c.StripeWebhookSecret })},
	{"stripe-secret-key-file", "STIPEND_STRIPE_SECRET_KEY_FILE", "", "file holding the Stripe secret key (its first line), with which Stipend makes Checkout Sessions and PaymentIntents and reconciles payments; or set STIPEND_STRIPE_SECRET_KEY", stringVar(func(c *Config) *string { return &c.StripeSecretKeyFile })},
	{"stripe-api-url", "STIPEND_STRIPE_API_URL", "", "base URL of the Stripe API (empty: Stripe's); tests point it at stripe-mock", stringVar(func(c *Config) *string { return &c.StripeAPIURL })},
	{"stripe-sweep-interval", "STIPEND_STRIPE_SWEEP_INTERVAL", "1m", "how often this instance reads pending Stripe payments from Stripe and applies their state (healing lost webhooks); 0 sweeps none (another instance, or `stipend stripe reconcile`, must)", durationVar(func(c *Config) *time.Duration { return &c.StripeSweepInterval })},
	{"stripe-sweep-age", "STIPEND_STRIPE_SWEEP_AGE", "5m", "how long a Stripe payment stays pending before the sweep reads it", durationVar(func(c *Config) *time.Duration { return &c.StripeSweepAge })},
	{"webhook-allow-private", "STIPEND_WEBHOOK_ALLOW_PRIVATE", "false", "let webhook endpoints on loopback/private addresses receive events", boolVar(func(c *Config) *bool { return &c.WebhookAllowPrivate })},
	{"webhook-concurrency", "STIPEND_WEBHOOK_CONCURRENCY", "4", "webhook deliveries this instance sends at once; 0 sends none (another instance or process must)", intVar(func(c *Config) *int { return &c.WebhookConcurrency })},
	{"hold-sweep-interval", "STIPEND_HOLD_SWEEP_INTERVAL", "30s", "how often this instance ends expired holds of idle entitlements; 0 sweeps none (another instance must)", durationVar(func(c *Config) *time.Duration { return &c.HoldSweepInterval })},
	{"cors-origins", "STIPEND_CORS_ORIGINS", "", "comma-separated origins allowed to call the reader routes from a browser", listVar(func(c *Config) *[]string { return &c.CORSOrigins })},
	{"public-url", "STIPEND_PUBLIC_URL", "", "where clients reach this service (https://billing.example.com), for the URLs of portal sessions (empty: the origin each request came to)", stringVar(func(c *Config) *string { return &c.PublicURL })},
	{"portal-frame-ancestors", "STIPEND_PORTAL_FRAME_ANCESTORS", "", "comma-separated origins that may embed the /portal page in a frame (CSP frame-ancestors; empty: none)", listVar(func(c *Config) *[]string { return &c.PortalFrameAncestors })},
	{"issuer", "STIPEND_ISSUER", "stipend", "issuer written into every receipt", stringVar(func(c *Config) *string { return &c.Issuer })},
	{"store-timeout", "STIPEND_STORE_TIMEOUT", "2s", "how long a request waits for the store before it answers 503 (unavailable; retry with the same key); keep it well under your callers' timeouts (the MCP gate's is 5s) so they can retry", durationVar(func(c *Config) *time.Duration { return &c.StoreTimeout })},
	{"shutdown-timeout", "STIPEND_SHUTDOWN_TIMEOUT", "8s", "how long SIGTERM waits for in-flight requests", durationVar(func(c *Config) *time.Duration { return &c.ShutdownTimeout })},
	{"ledger-retention", "STIPEND_LEDGER_RETENTION", "24h", "how long a completed Idempotency-Key request is replayed; pair it with the ledger's Firestore TTL policy (docs/idempotency.md)", durationVar(func(c *Config) *time.Duration { return &c.LedgerRetention })},
	{"log-level", "STIPEND_LOG_LEVEL", "info", "debug, info, warn or error", levelVar(func(c *Config) *slog.Level { return &c.LogLevel })},
	{"dev-keys-out", "STIPEND_DEV_KEYS_OUT", "", "development only: write the generated API keys to this file (JSON, mode 0600)", stringVar(func(c *Config) *string { return &c.DevKeysOut })},
}

// ParseConfig reads the serve configuration from args and env (a map of
// environment variables). Defaults come first, then env, then flags. It is a
// pure function: it touches no file and reads no process state.
func ParseConfig(args []string, env map[string]string) (Config, error) {
	c, fs, err := readSettings(args, env)
	if err != nil {
		return Config{}, err
	}
	if err := c.Validate(); err != nil {
		return Config{}, nameSource(err, fs, env)
	}
	return c, nil
}

// readSettings reads serve's settings from args and env without checking
// them together: the operator commands (`stipend ledger …`) share the
// settings but not serve's production requirements.
func readSettings(args []string, env map[string]string) (Config, *flag.FlagSet, error) {
	var c Config
	fs := newServeFlagSet(io.Discard)
	for _, s := range settings {
		def := s.def
		if v, ok := env[s.env]; ok {
			def = v
		}
		if err := s.bind(fs, &c, s.flag, def, s.help); err != nil {
			if _, ok := env[s.env]; ok {
				return Config{}, nil, fmt.Errorf("%s=%q: %w", s.env, def, err)
			}
			return Config{}, nil, err
		}
	}
	if err := fs.Parse(args); err != nil {
		return Config{}, nil, &UsageError{Err: err}
	}
	if fs.NArg() > 0 {
		return Config{}, nil, &UsageError{Err: fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	// The variable the Firestore tools and client libraries share; it has
	// no flag.
	c.FirestoreEmulatorHost = env["FIRESTORE_EMULATOR_HOST"]
	// A secret: no flag, so it never shows in a process listing.
	c.PostgresPassword = env["STIPEND_POSTGRES_PASSWORD"]
	c.StripeSecretKey = env["STIPEND_STRIPE_SECRET_KEY"]
	// Cloud Run (and other platforms) say which port to listen on in PORT.
	if _, set := env["STIPEND_ADDR"]; !set && !flagSet(fs, "addr") && env["PORT"] != "" {
		c.Addr = ":" + env["PORT"]
	}
	return c, fs, nil
}

// UsageError is a command line that cannot be parsed (an unknown flag, a
// stray argument): the caller prints the usage with it.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// settingError is a bad value of one setting, named by its flag; ParseConfig
// adds the value and names the environment variable instead when the value
// came from there.
type settingError struct {
	flag string // the setting's flag, without dashes
	msg  string
}

func (e *settingError) Error() string { return "--" + e.flag + ": " + e.msg }

// bad returns the settingError of the setting whose flag is flag.
func bad(flag, msg string) error { return &settingError{flag: flag, msg: msg} }

// nameSource returns err naming its setting as the operator gave it, with
// the value: STIPEND_STORE="postgres" when the value came from the
// environment and not from the command line, --store="postgres" otherwise.
func nameSource(err error, fs *flag.FlagSet, env map[string]string) error {
	se, ok := errors.AsType[*settingError](err)
	if !ok {
		return err
	}
	s := settingNamed(se.flag)
	if v, set := env[s.env]; set && !flagSet(fs, se.flag) {
		return fmt.Errorf("%s=%q: %s", s.env, v, se.msg)
	}
	return fmt.Errorf("--%s=%q: %s", se.flag, fs.Lookup(se.flag).Value.String(), se.msg)
}

// flagSet reports whether the flag called name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// Validate checks the settings together; production refusals live here.
func (c Config) Validate() error {
	switch {
	case c.Env != EnvDevelopment && c.Env != EnvProduction:
		return bad("env", "not development or production")
	case c.Store != StoreMemory && c.Store != StoreFirestore && c.Store != StorePostgres:
		return bad("store", "not memory, firestore or postgres")
	case c.Store == StorePostgres && c.PostgresURL == "":
		return bad("postgres-url", "is required with --store postgres")
	case c.PostgresPasswordFile != "" && c.PostgresPassword != "":
		return errors.New("--postgres-password-file and STIPEND_POSTGRES_PASSWORD: give the password one way")
	case c.PostgresMaxConns < 1 || c.PostgresMaxConns > 1000:
		return bad("postgres-max-conns", "must be between 1 and 1000")
	case c.PostgresLockTimeout < 0:
		return bad("postgres-lock-timeout", "must not be negative")
	case c.PostgresIdleTxTimeout < 0:
		return bad("postgres-idle-in-transaction-timeout", "must not be negative")
	case c.Addr == "":
		return bad("addr", "is required")
	case c.FirestoreDatabase == "":
		return bad("firestore-database", "is required (the default database is \"(default)\")")
	case c.ShutdownTimeout <= 0:
		return bad("shutdown-timeout", "must be positive")
	case c.StoreTimeout <= 0:
		return bad("store-timeout", "must be positive")
	case c.LedgerRetention <= 0:
		return bad("ledger-retention", "must be positive")
	case c.WebhookConcurrency < 0 || c.WebhookConcurrency > 256:
		return bad("webhook-concurrency", "must be between 0 and 256")
	case c.HoldSweepInterval < 0:
		return bad("hold-sweep-interval", "must not be negative")
	case c.StripeSecretKeyFile != "" && c.StripeSecretKey != "":
		return errors.New("--stripe-secret-key-file and STIPEND_STRIPE_SECRET_KEY: give the key one way")
	case c.StripeSweepInterval < 0:
		return bad("stripe-sweep-interval", "must not be negative")
	case c.StripeSweepAge <= 0:
		return bad("stripe-sweep-age", "must be positive")
	case c.Issuer == "":
		return bad("issuer", "is required")
	}
	if c.Env == EnvProduction {
		switch {
		case c.DevKeysOut != "":
			return bad("dev-keys-out", "development keys are never made in production")
		case c.Store == StoreMemory:
			return errors.New("production refuses the memory store: nothing in it is durable or shared between instances; use --store firestore or --store postgres (STIPEND_STORE)")
		case c.APIKeysFile == "":
			return errors.New("production needs an API key file: set --api-keys-file (STIPEND_API_KEYS_FILE); make keys with `stipend keys api --role ROLE`")
		case len(c.SigningKeyFiles) == 0:
			return errors.New("production needs a receipt signing key: set --signing-key-file (STIPEND_SIGNING_KEY_FILE); make one with `stipend keys signing --out FILE`")
		}
	}
	if c.DevKeysOut != "" && c.APIKeysFile != "" {
		return bad("dev-keys-out", "development keys are made only without an API key file (--api-keys-file); with one there are none to write")
	}
	return nil
}

// newServeFlagSet returns an empty flag set for serve whose errors and usage
// go to w.
func newServeFlagSet(w io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("stipend serve", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.Usage = func() {}
	return fs
}

func stringVar(field func(*Config) *string) func(*flag.FlagSet, *Config, string, string, string) error {
	return func(fs *flag.FlagSet, c *Config, name, def, help string) error {
		fs.StringVar(field(c), name, def, help)
		return nil
	}
}

// parsedVar makes a flag of type T whose default def is read with parse
// (wrong says what a bad default is not) and that define adds to the set
// ((*flag.FlagSet).BoolVar…).
func parsedVar[T any](field func(*Config) *T, parse func(string) (T, error), wrong string,
	define func(*flag.FlagSet, *T, string, T, string)) func(*flag.FlagSet, *Config, string, string, string) error {
	return func(fs *flag.FlagSet, c *Config, name, def, help string) error {
		v, err := parse(def)
		if err != nil {
			return errors.New(wrong)
		}
		define(fs, field(c), name, v, help)
		return nil
	}
}

func boolVar(field func(*Config) *bool) func(*flag.FlagSet, *Config, string, string, string) error {
	return parsedVar(field, strconv.ParseBool, "not a boolean (true or false)", (*flag.FlagSet).BoolVar)
}

func intVar(field func(*Config) *int) func(*flag.FlagSet, *Config, string, string, string) error {
	return parsedVar(field, strconv.Atoi, "not an integer", (*flag.FlagSet).IntVar)
}

func durationVar(field func(*Config) *time.Duration) func(*flag.FlagSet, *Config, string, string, string) error {
	return parsedVar(field, time.ParseDuration, "not a duration (such as 10s)", (*flag.FlagSet).DurationVar)
}

func levelVar(field func(*Config) *slog.Level) func(*flag.FlagSet, *Config, string, string, string) error {
	parse := func(s string) (l slog.Level, err error) { err = l.UnmarshalText([]byte(s)); return l, err }
	define := func(fs *flag.FlagSet, p *slog.Level, name string, v slog.Level, help string) {
		fs.TextVar(p, name, v, help)
	}
	return parsedVar(field, parse, "not a log level (debug, info, warn or error)", define)
}

func listVar(field func(*Config) *[]string) func(*flag.FlagSet, *Config, string, string, string) error {
	return func(fs *flag.FlagSet, c *Config, name, def, help string) error {
		p := field(c)
		*p = splitList(def)
		fs.Var(&listValue{p: p}, name, help)
		return nil
	}
}

// listValue is a repeatable, comma-separable flag. The first use on the
// command line replaces the value from the environment, so a flag wins.
type listValue struct {
	p   *[]string
	set bool
}

func (l *listValue) String() string {
	if l == nil || l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *listValue) Set(v string) error {
	if !l.set {
		*l.p, l.set = nil, true
	}
	*l.p = append(*l.p, splitList(v)...)
	return nil
}

// splitList splits a comma-separated list, dropping empty items and spaces.
func splitList(s string) []string {
	var out []string
	for item := range strings.SplitSeq(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// settingNamed returns the serve setting whose flag is name; it panics on
// a name no setting has, a mistake in this package.
func settingNamed(name string) setting {
	for _, s := range settings {
		if s.flag == name {
			return s
		}
	}
	panic("no setting --" + name)
}
