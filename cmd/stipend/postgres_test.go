package main_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/internal/syncbuf"
)

// TestMain_PostgresProduction runs the real program in production mode on
// PostgreSQL, twice on one database as two instances: the schema is
// migrated at the first start, the second instance sees the first's
// charges (the store is shared and durable), and neither logs the password.
func TestMain_PostgresProduction(t *testing.T) {
	url := pgtest.SchemaURL(t)
	dir := t.TempDir()
	apiKeys, signingKey, admin, host := writeKeyFiles(t, dir)
	const password = "not-a-real-password-7f3a" // the test server trusts loopback; the value must only stay secret
	pwFile := filepath.Join(dir, "pg-password")
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{
		"--env", "production", "--store", "postgres", "--postgres-url", url, "--postgres-password-file", pwFile,
		"--api-keys-file", apiKeys, "--signing-key-file", signingKey, "--webhook-concurrency", "1",
	}
	first := startMainEnv(t, nil, args...)
	waitReady(t, first)
	grantCredits(t, first.URL(), admin, "agent-demo")
	status, body := call(t, http.DefaultClient, "POST", first.URL()+"/v1/consume", host, consumeBody("pg-1"))
	if status != http.StatusOK || body["result"] != "consumed" {
		t.Fatalf("consume on the first instance: status %d, body %v; want 200 consumed", status, body)
	}
	second := startMainEnv(t, nil, args...)
	waitReady(t, second)
	status, body = call(t, http.DefaultClient, "POST", second.URL()+"/v1/consume", host, consumeBody("pg-1"))
	if status != http.StatusOK || body["result"] != "replay" {
		t.Errorf("the same consume on the second instance: status %d, body %v; want 200 replay", status, body)
	}
	for name, m := range map[string]*runningMain{"first": first, "second": second} {
		logs := m.stderr.String()
		if !strings.Contains(logs, `"message":"postgres store"`) || !strings.Contains(logs, `"message":"idempotency ledger on postgres","table":"idempotency_ledger","namespace":"idem_`) {
			t.Errorf("%s instance's logs do not say the store and ledger (its table and namespace) are on postgres:\n%s", name, logs)
		}
		if strings.Contains(logs, password) {
			t.Errorf("%s instance logged the PostgreSQL password:\n%s", name, logs)
		}
	}
	if logs := first.stderr.String(); !strings.Contains(logs, `"message":"postgres migration applied"`) {
		t.Errorf("the first instance did not log the migrations it applied:\n%s", logs)
	}
	if logs := second.stderr.String(); strings.Contains(logs, "migration applied") {
		t.Errorf("the second instance applied migrations again:\n%s", logs)
	}
}

// TestMain_PostgresMigrateByHand: with --postgres-migrate=false serve
// refuses a schema that lacks a migration and says to run `stipend
// migrate`, which applies them all; then serve starts.
func TestMain_PostgresMigrateByHand(t *testing.T) {
	url := pgtest.SchemaURL(t)
	env := map[string]string{"STIPEND_POSTGRES_URL": url}
	m := main.NewMain()
	m.Stdout, m.Stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
	if err := m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--store", "postgres", "--postgres-migrate=false"}, env); err != nil {
		t.Fatal(err)
	}
	err := m.Run(context.Background())
	_ = m.Close()
	if err == nil || !strings.Contains(err.Error(), "stipend migrate") {
		t.Fatalf("serve on an empty schema with --postgres-migrate=false: %v; want a refusal naming stipend migrate", err)
	}

	code, stdout, stderr := runCommand(t, env, "migrate", "--status")
	if code != 0 || !strings.Contains(stdout, "store: pending 00001_initial.sql") || !strings.Contains(stdout, "ledger: pending 00001_ledger.sql") {
		t.Errorf("stipend migrate --status = %d\n%s%s\nwant both histories pending", code, stdout, stderr)
	}
	code, stdout, stderr = runCommand(t, env, "migrate")
	if code != 0 || !strings.Contains(stdout, "store: applied 00001_initial.sql") || !strings.Contains(stdout, "ledger: applied 00001_ledger.sql") {
		t.Fatalf("stipend migrate = %d\n%s%s\nwant both histories applied", code, stdout, stderr)
	}
	code, stdout, _ = runCommand(t, env, "migrate")
	if code != 0 || stdout != "store: up to date\nledger: up to date\n" {
		t.Errorf("stipend migrate again = %d\n%s\nwant both up to date", code, stdout)
	}
	served := startMainEnv(t, env, "--store", "postgres", "--postgres-migrate=false", "--webhook-concurrency", "0")
	waitReady(t, served)
}

func TestMigrateCmd_NeedsAURL(t *testing.T) {
	code, _, stderr := runCommand(t, nil, "migrate")
	if code != 2 || !strings.Contains(stderr, "--postgres-url") {
		t.Errorf("stipend migrate without a URL = %d, %q; want 2 naming --postgres-url", code, stderr)
	}
}
