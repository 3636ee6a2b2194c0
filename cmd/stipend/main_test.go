package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/internal/syncbuf"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
)

// runningMain is a started Main and what it printed.
type runningMain struct {
	*main.Main
	stdout, stderr *syncbuf.Buffer
}

// startMain runs the real program on 127.0.0.1:0 with args (and no
// environment), and closes it when the test ends.
func startMain(tb testing.TB, args ...string) *runningMain {
	tb.Helper()
	return startMainEnv(tb, nil, args...)
}

// startMainEnv is startMain with the environment env.
func startMainEnv(tb testing.TB, env map[string]string, args ...string) *runningMain {
	tb.Helper()
	m := main.NewMain()
	r := &runningMain{Main: m, stdout: &syncbuf.Buffer{}, stderr: &syncbuf.Buffer{}}
	m.Stdout, m.Stderr = r.stdout, r.stderr
	if err := m.ParseFlags(append([]string{"--addr", "127.0.0.1:0"}, args...), env); err != nil {
		tb.Fatalf("ParseFlags(%q): %v", args, err)
	}
	if err := m.Run(context.Background()); err != nil {
		tb.Fatalf("Run: %v\nstderr:\n%s", err, r.stderr)
	}
	tb.Cleanup(func() {
		if err := m.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return r
}

// call sends a JSON request with key and returns the status and decoded body.
func call(tb testing.TB, client *http.Client, method, url, key string, body any) (int, map[string]any) {
	tb.Helper()
	return callIdempotent(tb, client, method, url, key, "", body)
}

// callIdempotent is call with an Idempotency-Key header (none when idemKey is "").
func callIdempotent(tb testing.TB, client *http.Client, method, url, key, idemKey string, body any) (int, map[string]any) {
	tb.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			tb.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		tb.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	resp, err := client.Do(req)
	if err != nil {
		tb.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &out)
	return resp.StatusCode, out
}

// readDevKeys reads the --dev-keys-out file and checks its mode.
func readDevKeys(tb testing.TB, path string) main.DevKeys {
	tb.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		tb.Fatalf("dev keys file: %v", err)
	}
	if got, want := fi.Mode().Perm(), os.FileMode(0o600); got != want {
		tb.Errorf("dev keys file mode = %v, want %v", got, want)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	var keys main.DevKeys
	if err := json.Unmarshal(b, &keys); err != nil {
		tb.Fatalf("dev keys file %s: %v", b, err)
	}
	for role, k := range map[string]string{"host": keys.Host, "billing": keys.Billing, "admin": keys.Admin, "reader": keys.Reader} {
		if !strings.HasPrefix(k, "stp_"+role+"_") {
			tb.Errorf("dev keys file: %s key = %q, want prefix stp_%s_", role, k, role)
		}
	}
	return keys
}

// grantCredits gives agent 1000 USD cents for service "search".
func grantCredits(tb testing.TB, url, adminKey, agent string) {
	tb.Helper()
	status, body := callIdempotent(tb, http.DefaultClient, "POST", url+"/v1/accounts/"+agent+"/entitlements", adminKey, "grant-"+agent, map[string]any{
		"type": "credits", "scope": map[string]any{"service": "search"},
		"balance": map[string]any{"cents": 1000, "currency": "USD"},
	})
	if status != http.StatusCreated && status != http.StatusOK {
		tb.Fatalf("grant: status %d, body %v", status, body)
	}
}

// consumeBody is a consume of 100 cents under key.
func consumeBody(key string) map[string]any {
	return map[string]any{
		"agentId": main.DevAgent, "service": "search", "tool": "web", "idempotencyKey": key,
		"cost": map[string]any{"cents": 100, "currency": "USD"},
	}
}

func TestMain_Development(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "dev-keys.json")
	// An existing, world-readable file is rewritten and made private.
	if err := os.WriteFile(keysFile, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := startMain(t, "--dev-keys-out", keysFile)
	keys := readDevKeys(t, keysFile)

	t.Run("SaysNothingIsDurable", func(t *testing.T) {
		out := m.stdout.String()
		for _, want := range []string{"DEVELOPMENT", "NOTHING IS DURABLE", "EPHEMERAL", keys.Host, keys.Reader, main.DevAgent, keysFile} {
			if !strings.Contains(out, want) {
				t.Errorf("banner does not say %q:\n%s", want, out)
			}
		}
	})
	t.Run("LogsListeningAddress", func(t *testing.T) {
		// Cloud Logging's field names: severity and message.
		if want := `"severity":"INFO","message":"listening","addr":"` + m.Addr() + `"`; !strings.Contains(m.stderr.String(), want) {
			t.Errorf("logs do not contain %s:\n%s", want, m.stderr)
		}
	})
	t.Run("OpsEndpoints", func(t *testing.T) {
		for path, want := range map[string]string{
			"/healthz":               "",
			"/readyz":                "",
			"/metrics":               "go_goroutines",
			"/.well-known/jwks.json": `"crv":"Ed25519"`,
		} {
			resp, err := http.Get(m.URL() + path)
			if err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(b), want) {
				t.Errorf("GET %s: status %d, body %.200s; want 200 containing %q", path, resp.StatusCode, b, want)
			}
		}
	})
	t.Run("Consume", func(t *testing.T) {
		grantCredits(t, m.URL(), keys.Admin, main.DevAgent)
		for _, want := range []string{"consumed", "replay"} {
			status, body := call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", keys.Host, consumeBody("call-1"))
			if status != http.StatusOK || body["result"] != want {
				t.Errorf("consume: status %d, body %v; want 200 %q", status, body, want)
			}
		}
	})
	t.Run("ReaderKeyCoversDevAgent", func(t *testing.T) {
		status, body := call(t, http.DefaultClient, "GET", m.URL()+"/v1/accounts/"+main.DevAgent+"/entitlements", keys.Reader, nil)
		if status != http.StatusOK {
			t.Errorf("reader GET entitlements of %s: status %d, body %v; want 200", main.DevAgent, status, body)
		}
	})
	t.Run("HostKeyCannotGrant", func(t *testing.T) {
		status, _ := call(t, http.DefaultClient, "POST", m.URL()+"/v1/accounts/"+main.DevAgent+"/entitlements", keys.Host, map[string]any{})
		if status != http.StatusForbidden {
			t.Errorf("host grant: status %d, want 403", status)
		}
	})
}

// TestMain_ShutdownDrainsInFlight starts a consume, begins the shutdown
// while its body is still arriving, and checks the consume completes, new
// connections are refused and Close reports a clean stop.
func TestMain_ShutdownDrainsInFlight(t *testing.T) {
	keysFile := filepath.Join(t.TempDir(), "dev-keys.json")
	m := main.NewMain()
	m.Stdout, m.Stderr = io.Discard, io.Discard
	if err := m.ParseFlags([]string{"--addr", "127.0.0.1:0", "--dev-keys-out", keysFile}, nil); err != nil {
		t.Fatal(err)
	}
	// The server marks a connection active once it reads a request; the
	// test waits for that on the in-flight request's own connection.
	active := make(chan string, 16)
	m.HTTPServer.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateActive {
			active <- c.RemoteAddr().String()
		}
	}
	if err := m.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			_ = m.Close()
		}
	})
	keys := readDevKeys(t, keysFile)
	client := &http.Client{Transport: &http.Transport{}}
	grantCredits(t, m.URL(), keys.Admin, main.DevAgent)
	<-active // the grant's connection

	body, _ := json.Marshal(consumeBody("in-flight"))
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", m.URL()+"/v1/consume", pr)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+keys.Host)
	clientAddr := make(chan string, 1)
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { clientAddr <- info.Conn.LocalAddr().String() },
	}))
	type result struct {
		status int
		body   map[string]any
		err    error
	}
	done := make(chan result, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer resp.Body.Close()
		var out map[string]any
		err = json.NewDecoder(resp.Body).Decode(&out)
		done <- result{status: resp.StatusCode, body: out, err: err}
	}()
	if _, err := pw.Write(body[:10]); err != nil {
		t.Fatal(err)
	}
	for addr := <-clientAddr; ; {
		if <-active == addr {
			break
		}
	}

	addr := m.Addr()
	closeErr := make(chan error, 1)
	go func() { closeErr <- m.Close() }()
	// Wait until the listener is closed: new connections are refused.
	for {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break
		}
		c.Close()
	}
	if _, err := pw.Write(body[10:]); err != nil {
		t.Fatal(err)
	}
	pw.Close()

	r := <-done
	if r.err != nil || r.status != http.StatusOK || r.body["result"] != "consumed" {
		t.Errorf("in-flight consume: status %d, body %v, err %v; want 200 consumed", r.status, r.body, r.err)
	}
	if err := <-closeErr; err != nil {
		t.Errorf("Close: %v, want a clean drain", err)
	}
	closed = true
}

// TestMain_DevelopmentWithKeyFiles checks that given key files are used in
// development too: no keys are made, and only the store is called ephemeral.
func TestMain_DevelopmentWithKeyFiles(t *testing.T) {
	apiKeys, signingKey, admin, _ := writeKeyFiles(t, t.TempDir())
	m := startMain(t, "--api-keys-file", apiKeys, "--signing-key-file", signingKey)
	if m.DevKeys != nil {
		t.Errorf("DevKeys = %+v, want none with --api-keys-file", m.DevKeys)
	}
	out := m.stdout.String()
	if !strings.Contains(out, "NOTHING IS DURABLE") || strings.Contains(out, "EPHEMERAL") {
		t.Errorf("banner with key files should only warn about the store:\n%s", out)
	}
	status, body := call(t, http.DefaultClient, "GET", m.URL()+"/v1/accounts/agent-x/entitlements", admin, nil)
	if status != http.StatusOK {
		t.Errorf("admin key from the file: status %d, body %v; want 200", status, body)
	}
}
