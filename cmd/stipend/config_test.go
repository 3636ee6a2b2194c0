package main_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
)

// defaults is the configuration with nothing set.
func defaults() main.Config {
	return main.Config{
		Addr:                  "127.0.0.1:8080",
		Env:                   main.EnvDevelopment,
		Store:                 main.StoreMemory,
		FirestoreDatabase:     "(default)",
		Issuer:                "stipend",
		ShutdownTimeout:       8 * time.Second,
		StoreTimeout:          2 * time.Second,
		LedgerRetention:       24 * time.Hour,
		LogLevel:              slog.LevelInfo,
		WebhookConcurrency:    4,
		PostgresMaxConns:      10,
		PostgresMigrate:       true,
		PostgresLockTimeout:   5 * time.Second,
		PostgresIdleTxTimeout: 10 * time.Second,
		HoldSweepInterval:     30 * time.Second,
		StripeSweepInterval:   time.Minute,
		StripeSweepAge:        5 * time.Minute,
	}
}

// with returns defaults changed by f.
func with(f func(*main.Config)) main.Config {
	c := defaults()
	f(&c)
	return c
}

// production is the smallest environment production accepts.
var production = map[string]string{
	"STIPEND_ENV":              "production",
	"STIPEND_STORE":            "firestore",
	"STIPEND_API_KEYS_FILE":    "/secrets/keys.json",
	"STIPEND_SIGNING_KEY_FILE": "/secrets/signing.json",
}

// merge returns a copy of base with extra set.
func merge(base map[string]string, extra map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range base {
		out[k] = v
	}
	for k, v := range extra {
		out[k] = v
	}
	return out
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want main.Config
	}{
		{name: "Defaults", want: defaults()},
		{
			name: "EnvOnly",
			env: map[string]string{
				"STIPEND_ADDR": ":9090", "STIPEND_COLLECTION_PREFIX": "staging_", "STIPEND_ISSUER": "acme",
				"STIPEND_SHUTDOWN_TIMEOUT": "3s", "STIPEND_LOG_LEVEL": "debug", "STIPEND_CORS_ORIGINS": "https://a.example, https://b.example",
				"STIPEND_WEBHOOK_ALLOW_PRIVATE": "true", "STIPEND_STRIPE_WEBHOOK_SECRET": "whsec_x", "STIPEND_WEBHOOK_CONCURRENCY": "0",
				"STIPEND_FIRESTORE_PROJECT": "p1", "STIPEND_FIRESTORE_DATABASE": "stipend", "STIPEND_DEV_KEYS_OUT": "/tmp/k.json",
				"STIPEND_STORE_TIMEOUT": "750ms",
			},
			want: with(func(c *main.Config) {
				c.Addr, c.CollectionPrefix, c.Issuer = ":9090", "staging_", "acme"
				c.ShutdownTimeout, c.LogLevel = 3*time.Second, slog.LevelDebug
				c.CORSOrigins = []string{"https://a.example", "https://b.example"}
				c.WebhookAllowPrivate, c.StripeWebhookSecret, c.WebhookConcurrency = true, "whsec_x", 0
				c.FirestoreProject, c.FirestoreDatabase, c.DevKeysOut = "p1", "stipend", "/tmp/k.json"
				c.StoreTimeout = 750 * time.Millisecond
			}),
		},
		{
			name: "FlagWinsOverEnv",
			args: []string{"--addr", ":1", "--log-level=warn", "--webhook-allow-private=false", "--cors-origins", "https://c.example", "--shutdown-timeout=1s", "--store-timeout=5s"},
			env: map[string]string{
				"STIPEND_ADDR": ":9090", "STIPEND_LOG_LEVEL": "debug", "STIPEND_WEBHOOK_ALLOW_PRIVATE": "true",
				"STIPEND_CORS_ORIGINS": "https://a.example", "STIPEND_SHUTDOWN_TIMEOUT": "30s", "STIPEND_STORE_TIMEOUT": "1s",
			},
			want: with(func(c *main.Config) {
				c.Addr, c.LogLevel, c.ShutdownTimeout, c.StoreTimeout = ":1", slog.LevelWarn, time.Second, 5*time.Second
				c.CORSOrigins = []string{"https://c.example"}
			}),
		},
		{
			name: "SigningKeysFromEnvCommaSeparated",
			env:  production,
			want: with(func(c *main.Config) {
				c.Env, c.Store, c.APIKeysFile = main.EnvProduction, main.StoreFirestore, "/secrets/keys.json"
				c.SigningKeyFiles = []string{"/secrets/signing.json"}
			}),
		},
		{
			name: "SigningKeyFlagRepeatedReplacesEnv",
			args: []string{"--signing-key-file", "new.json", "--signing-key-file=old.json,older.json"},
			env:  merge(production, map[string]string{"STIPEND_SIGNING_KEY_FILE": "a.json,b.json"}),
			want: with(func(c *main.Config) {
				c.Env, c.Store, c.APIKeysFile = main.EnvProduction, main.StoreFirestore, "/secrets/keys.json"
				c.SigningKeyFiles = []string{"new.json", "old.json", "older.json"}
			}),
		},
		{
			name: "FlagsOnlyProduction",
			args: []string{"--env", "production", "--store", "firestore", "--api-keys-file", "k.json", "--signing-key-file", "s.json", "--firestore-project", "p", "--firestore-database", "db"},
			want: with(func(c *main.Config) {
				c.Env, c.Store, c.APIKeysFile = main.EnvProduction, main.StoreFirestore, "k.json"
				c.SigningKeyFiles, c.FirestoreProject, c.FirestoreDatabase = []string{"s.json"}, "p", "db"
			}),
		},
		{
			name: "FlagOverridesEnvToDevelopment",
			args: []string{"--env=development", "--store=memory"},
			env:  production,
			want: with(func(c *main.Config) {
				c.APIKeysFile, c.SigningKeyFiles = "/secrets/keys.json", []string{"/secrets/signing.json"}
			}),
		},
		{
			name: "OtherEnvironmentIgnored",
			env:  map[string]string{"HOME": "/root", "STIPEND": "x"},
			want: defaults(),
		},
		{
			name: "EmulatorHost",
			env:  map[string]string{"FIRESTORE_EMULATOR_HOST": "127.0.0.1:1"},
			want: with(func(c *main.Config) { c.FirestoreEmulatorHost = "127.0.0.1:1" }),
		},
		{
			name: "PostgresProduction",
			env: merge(production, map[string]string{
				"STIPEND_STORE": "postgres", "STIPEND_POSTGRES_URL": "postgres://stipend@db:5432/stipend?sslmode=verify-full",
				"STIPEND_POSTGRES_PASSWORD": "pw", "STIPEND_POSTGRES_MAX_CONNS": "25", "STIPEND_POSTGRES_MIGRATE": "false",
			}),
			want: with(func(c *main.Config) {
				c.Env, c.Store, c.APIKeysFile = main.EnvProduction, main.StorePostgres, "/secrets/keys.json"
				c.SigningKeyFiles = []string{"/secrets/signing.json"}
				c.PostgresURL, c.PostgresPassword = "postgres://stipend@db:5432/stipend?sslmode=verify-full", "pw"
				c.PostgresMaxConns, c.PostgresMigrate = 25, false
			}),
		},
		{
			name: "PostgresPasswordFileFlag",
			args: []string{"--store", "postgres", "--postgres-url", "postgres://db/stipend", "--postgres-password-file", "/run/secrets/pg"},
			want: with(func(c *main.Config) {
				c.Store, c.PostgresURL, c.PostgresPasswordFile = main.StorePostgres, "postgres://db/stipend", "/run/secrets/pg"
			}),
		},
		{
			name: "PortWhenAddrUnset",
			env:  map[string]string{"PORT": "9999"},
			want: with(func(c *main.Config) { c.Addr = ":9999" }),
		},
		{
			name: "AddrEnvWinsOverPort",
			env:  map[string]string{"PORT": "9999", "STIPEND_ADDR": "127.0.0.1:7"},
			want: with(func(c *main.Config) { c.Addr = "127.0.0.1:7" }),
		},
		{
			name: "AddrFlagWinsOverPort",
			args: []string{"--addr", "127.0.0.1:0"},
			env:  map[string]string{"PORT": "9999"},
			want: with(func(c *main.Config) { c.Addr = "127.0.0.1:0" }),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := main.ParseConfig(tt.args, tt.env)
			if err != nil {
				t.Fatalf("ParseConfig(%q): %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ParseConfig(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestParseConfig_Errors(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		wantErr string // a substring of the error
	}{
		{"UnknownFlag", []string{"--nope"}, nil, "flag provided but not defined: -nope"},
		{"StrayArgument", []string{"extra"}, nil, `unexpected argument "extra"`},
		{"BadEnvName", []string{"--env", "staging"}, nil, `--env="staging": not development or production`},
		{"BadEnvNameFromEnv", nil, map[string]string{"STIPEND_ENV": "staging"}, `STIPEND_ENV="staging": not development or production`},
		{"BadStore", nil, map[string]string{"STIPEND_STORE": "mysql"}, `STIPEND_STORE="mysql": not memory, firestore or postgres`},
		{"BadStoreFlagOverEnv", []string{"--store", "nope"}, map[string]string{"STIPEND_STORE": "postgres"}, `--store="nope": not memory, firestore or postgres`},
		{"PostgresNeedsURL", []string{"--store", "postgres"}, nil, `--postgres-url="": is required with --store postgres`},
		{"PostgresPasswordTwice", []string{"--postgres-password-file", "pw"}, map[string]string{"STIPEND_POSTGRES_PASSWORD": "x"}, "give the password one way"},
		{"PostgresMaxConnsZero", []string{"--postgres-max-conns", "0"}, nil, `--postgres-max-conns="0": must be between 1 and 1000`},
		{"BadPostgresMigrateEnv", nil, map[string]string{"STIPEND_POSTGRES_MIGRATE": "sometimes"}, "STIPEND_POSTGRES_MIGRATE"},
		{"BadBoolEnv", nil, map[string]string{"STIPEND_WEBHOOK_ALLOW_PRIVATE": "maybe"}, "STIPEND_WEBHOOK_ALLOW_PRIVATE"},
		{"BadDurationEnv", nil, map[string]string{"STIPEND_SHUTDOWN_TIMEOUT": "soon"}, "STIPEND_SHUTDOWN_TIMEOUT"},
		{"BadLevelEnv", nil, map[string]string{"STIPEND_LOG_LEVEL": "loud"}, "STIPEND_LOG_LEVEL"},
		{"BadDurationFlag", []string{"--shutdown-timeout", "soon"}, nil, "shutdown-timeout"},
		{"BadIntEnv", nil, map[string]string{"STIPEND_WEBHOOK_CONCURRENCY": "four"}, "STIPEND_WEBHOOK_CONCURRENCY"},
		{"NegativeConcurrency", []string{"--webhook-concurrency", "-1"}, nil, "--webhook-concurrency"},
		{"ZeroShutdownTimeout", []string{"--shutdown-timeout", "0s"}, nil, `--shutdown-timeout="0s": must be positive`},
		{"ZeroShutdownTimeoutEnv", nil, map[string]string{"STIPEND_SHUTDOWN_TIMEOUT": "0"}, `STIPEND_SHUTDOWN_TIMEOUT="0": must be positive`},
		{"TooManyWebhookWorkersEnv", nil, map[string]string{"STIPEND_WEBHOOK_CONCURRENCY": "300"}, `STIPEND_WEBHOOK_CONCURRENCY="300": must be between 0 and 256`},
		{"EmptyIssuerEnv", nil, map[string]string{"STIPEND_ISSUER": ""}, `STIPEND_ISSUER="": is required`},
		{"EmptyDatabase", []string{"--firestore-database="}, nil, `--firestore-database="": is required`},
		{"ZeroStoreTimeout", []string{"--store-timeout", "0s"}, nil, `--store-timeout="0s": must be positive`},
		{"ZeroStoreTimeoutEnv", nil, map[string]string{"STIPEND_STORE_TIMEOUT": "0"}, `STIPEND_STORE_TIMEOUT="0": must be positive`},
		{"BadStoreTimeoutEnv", nil, map[string]string{"STIPEND_STORE_TIMEOUT": "fast"}, "STIPEND_STORE_TIMEOUT"},
		{"ProductionRefusesMemory", nil, merge(production, map[string]string{"STIPEND_STORE": "memory"}), "production refuses the memory store"},
		{"ProductionRefusesMemoryByDefault", []string{"--env", "production"}, nil, "production refuses the memory store"},
		{"ProductionNeedsAPIKeys", []string{"--api-keys-file="}, production, "production needs an API key file"},
		{"ProductionNeedsSigningKey", nil, merge(production, map[string]string{"STIPEND_SIGNING_KEY_FILE": " , "}), "production needs a receipt signing key"},
		{"ProductionRefusesDevKeys", []string{"--dev-keys-out", "k.json"}, production, `--dev-keys-out="k.json": development keys are never made in production`},
		{"ProductionRefusesDevKeysEnv", nil, merge(production, map[string]string{"STIPEND_DEV_KEYS_OUT": "k.json"}), `STIPEND_DEV_KEYS_OUT="k.json": development keys are never made in production`},
		{"DevKeysOutWithKeyFile", []string{"--dev-keys-out", "k.json", "--api-keys-file", "keys.json"}, nil, `--dev-keys-out="k.json": development keys are made only without an API key file`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := main.ParseConfig(tt.args, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseConfig(%q) error = %v, want one containing %q", tt.args, err, tt.wantErr)
			}
		})
	}
}

// TestProductionRefusals_Documented: every refusal docs/configuration.md
// lists is what its condition gets, so none is documented that cannot
// appear.
func TestProductionRefusals_Documented(t *testing.T) {
	b := repoFile(t, "docs/configuration.md")
	_, section, _ := strings.Cut(string(b), "## Production refusals")
	section, _, _ = strings.Cut(section, "\n## ")
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string // a row's message, as the table gives it in backquotes
	}{
		{"DevKeysOut", []string{"--dev-keys-out", "FILE"}, production, `--dev-keys-out="FILE": development keys are never made in production`},
		{"DevKeysOutEnv", nil, merge(production, map[string]string{"STIPEND_DEV_KEYS_OUT": "FILE"}), `STIPEND_DEV_KEYS_OUT="FILE": …`},
		{"MemoryStore", nil, merge(production, map[string]string{"STIPEND_STORE": "memory"}), "production refuses the memory store"},
		{"NoAPIKeysFile", []string{"--api-keys-file="}, production, "production needs an API key file"},
		{"NoSigningKeyFile", []string{"--signing-key-file="}, production, "production needs a receipt signing key"},
	}
	rows := -2 // the header and its rule
	for line := range strings.Lines(section) {
		if strings.HasPrefix(line, "|") {
			rows++
		}
	}
	if rows != 4 {
		t.Errorf("docs/configuration.md lists %d production refusals, want the 4 this test checks", rows)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(section, "`"+tt.want+"`") {
				t.Errorf("docs/configuration.md, Production refusals, does not give `%s`", tt.want)
			}
			_, err := main.ParseConfig(tt.args, tt.env)
			want := strings.TrimSuffix(tt.want, "…")
			if err == nil || !strings.HasPrefix(err.Error(), want) {
				t.Errorf("ParseConfig(%q) error = %v, want one starting %q", tt.args, err, want)
			}
		})
	}
}

// TestBadValues_Documented: the messages docs/configuration.md quotes for
// bad values are the ones the binary prints, word for word, with exit 2.
func TestBadValues_Documented(t *testing.T) {
	b := repoFile(t, "docs/configuration.md")
	for _, tt := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"STIPEND_SHUTDOWN_TIMEOUT": "soon"}, `stipend serve: STIPEND_SHUTDOWN_TIMEOUT="soon": not a duration (such as 10s)`},
		{nil, map[string]string{"STIPEND_STORE": "mongo"}, `stipend serve: STIPEND_STORE="mongo": not memory, firestore or postgres`},
		{[]string{"--shutdown-timeout", "0s"}, nil, `stipend serve: --shutdown-timeout="0s": must be positive`},
	} {
		if !strings.Contains(string(b), "`"+tt.want+"`") {
			t.Errorf("docs/configuration.md does not quote `%s`", tt.want)
		}
		code, _, stderr := runCommand(t, tt.env, tt.args...)
		if first, _, _ := strings.Cut(stderr, "\n"); code != 2 || first != tt.want {
			t.Errorf("stipend %v with %v: exit %d, stderr %q; want 2 and %q", tt.args, tt.env, code, first, tt.want)
		}
	}
}
