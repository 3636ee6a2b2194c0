package main_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/apikey"
	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/receipt"
)

// writeKeyFiles writes an API key file (one admin, one host key) and a
// signing key file into dir, and returns their paths and the raw keys.
func writeKeyFiles(tb testing.TB, dir string) (apiKeys, signingKey, admin, host string) {
	tb.Helper()
	var entries []apikey.Key
	for _, r := range []struct {
		role apikey.Role
		raw  *string
	}{{apikey.RoleAdmin, &admin}, {apikey.RoleHost, &host}} {
		raw, k, err := apikey.Generate("", r.role, nil)
		if err != nil {
			tb.Fatal(err)
		}
		*r.raw, entries = raw, append(entries, k)
	}
	b, err := json.Marshal(apikey.File{Keys: entries})
	if err != nil {
		tb.Fatal(err)
	}
	apiKeys = filepath.Join(dir, "api-keys.json")
	if err := os.WriteFile(apiKeys, b, 0o600); err != nil {
		tb.Fatal(err)
	}
	sk, err := receipt.GenerateKey()
	if err != nil {
		tb.Fatal(err)
	}
	signingKey = filepath.Join(dir, "signing-key.json")
	if err := os.WriteFile(signingKey, sk, 0o600); err != nil {
		tb.Fatal(err)
	}
	return apiKeys, signingKey, admin, host
}

// waitReady waits until GET /readyz answers 200, within a minute. The first
// calls to a freshly started emulator can outlast one probe's deadline on a
// loaded machine, so a 503 is asked again, as a platform would.
func waitReady(tb testing.TB, m *runningMain) {
	tb.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(m.URL() + "/readyz")
		if err != nil {
			tb.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("GET /readyz: status %d for a minute, want 200\nstderr:\n%s", resp.StatusCode, m.stderr)
		}
		time.Sleep(100 * time.Millisecond) // between probes; each waits up to its own deadline
	}
}

// TestMain_FirestoreProduction runs the real program in production mode on
// the Firestore emulator, in a named database, with key files.
func TestMain_FirestoreProduction(t *testing.T) {
	env := map[string]string{"FIRESTORE_EMULATOR_HOST": emulator.Host(t)}
	apiKeys, signingKey, admin, host := writeKeyFiles(t, t.TempDir())
	m := startMainEnv(t, env,
		"--env", "production", "--store", "firestore",
		"--firestore-project", emulator.ProjectID, "--firestore-database", "stipend-cmd-test",
		"--collection-prefix", emulator.Prefix(t),
		"--api-keys-file", apiKeys, "--signing-key-file", signingKey,
	)
	if out := m.stdout.String(); out != "" {
		t.Errorf("production printed a development banner:\n%s", out)
	}
	waitReady(t, m)
	grantCredits(t, m.URL(), admin, "agent-demo")
	status, body := call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", host, consumeBody("fs-1"))
	if status != http.StatusOK || body["result"] != "consumed" {
		t.Errorf("consume: status %d, body %v; want 200 consumed", status, body)
	}
	if logs := m.stderr.String(); !strings.Contains(logs, `"message":"firestore store"`) {
		t.Errorf("logs do not say which store is used:\n%s", logs)
	}
	// The store's counters are metrics: the consume was one batch on its
	// entitlement, and no attempt was retried.
	resp, err := http.Get(m.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	metrics, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{
		`stipend_firestore_batches_total{on="entitlement"} 1`,
		`stipend_firestore_batches_total{on="lease"} 0`,
		`stipend_firestore_retries_total{reason="stale_read"} 0`,
		`stipend_firestore_retries_total{reason="lock_timeout"} 0`,
		`stipend_firestore_lease_takes_total 0`,
		`stipend_firestore_lease_gathers_total 0`,
	} {
		if !strings.Contains(string(metrics), line+"\n") {
			t.Errorf("/metrics lacks %q:\n%s", line, grepLines(string(metrics), "stipend_firestore"))
		}
	}
}

// grepLines returns the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestMain_EmulatorFromItsEnvironment: the program reaches the emulator that
// the environment it is given names, whatever the process environment says
// (the Firestore client library would otherwise read it from there).
func TestMain_EmulatorFromItsEnvironment(t *testing.T) {
	env := map[string]string{"FIRESTORE_EMULATOR_HOST": emulator.Host(t)}
	t.Setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:1") // nothing listens on port 1
	m := startMainEnv(t, env,
		"--store", "firestore", "--firestore-project", emulator.ProjectID,
		"--collection-prefix", emulator.Prefix(t), "--webhook-concurrency", "0",
	)
	waitReady(t, m) // the store and the ledger answer on the emulator of the map
	grantCredits(t, m.URL(), m.DevKeys.Admin, main.DevAgent)
	status, body := call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", m.DevKeys.Host, consumeBody("env-1"))
	if status != http.StatusOK || body["result"] != "consumed" {
		t.Errorf("consume: status %d, body %v; want 200 consumed", status, body)
	}
	if logs := m.stderr.String(); !strings.Contains(logs, `"emulator":"`+env["FIRESTORE_EMULATOR_HOST"]+`"`) {
		t.Errorf("the store's log line does not name the emulator of the map %s:\n%s", env["FIRESTORE_EMULATOR_HOST"], logs)
	}
}
