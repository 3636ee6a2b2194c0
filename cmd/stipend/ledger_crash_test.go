package main_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/internal/syncbuf"
	"github.com/stipend-mcp/stipend/problem"
)

// crashServer is one `stipend serve` process of the crash test.
type crashServer struct {
	cmd    *exec.Cmd
	url    string
	keys   main.DevKeys
	stderr *syncbuf.Buffer
	done   chan struct{}
}

// crashEnv is the environment of every process of the crash test: the
// emulator, a collection prefix of its own, development mode on Firestore.
func crashEnv(prefix string, extra ...string) []string {
	return append([]string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"FIRESTORE_EMULATOR_HOST=" + os.Getenv("FIRESTORE_EMULATOR_HOST"),
		"STIPEND_STORE=firestore", "STIPEND_FIRESTORE_PROJECT=" + emulator.ProjectID,
		"STIPEND_COLLECTION_PREFIX=" + prefix, "STIPEND_ADDR=127.0.0.1:0",
		"STIPEND_WEBHOOK_CONCURRENCY=0",
	}, extra...)
}

// startCrashServer runs the binary and waits until it listens and is ready.
func startCrashServer(t *testing.T, bin, prefix string, extra ...string) *crashServer {
	t.Helper()
	keysFile := filepath.Join(t.TempDir(), "dev-keys.json")
	s := &crashServer{stderr: &syncbuf.Buffer{}, done: make(chan struct{})}
	s.cmd = exec.Command(bin, "serve")
	s.cmd.Env = crashEnv(prefix, append(extra, "STIPEND_DEV_KEYS_OUT="+keysFile)...)
	s.cmd.Stdout = io.Discard
	pipe, err := s.cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill() // only this test's own child, by its pid
		<-s.done
	})
	addr := make(chan string, 1)
	go func() {
		defer close(s.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			s.stderr.Write([]byte(line + "\n"))
			var entry struct{ Msg, Message, Addr string }
			if json.Unmarshal([]byte(line), &entry) == nil && (entry.Msg == "listening" || entry.Message == "listening") && entry.Addr != "" {
				addr <- entry.Addr
			}
		}
		_ = s.cmd.Wait()
	}()
	select {
	case a := <-addr:
		s.url = "http://" + a
	case <-s.done:
		t.Fatalf("stipend serve exited before listening:\n%s", s.stderr)
	case <-time.After(60 * time.Second):
		t.Fatalf("stipend serve did not listen within 60 s:\n%s", s.stderr)
	}
	b, err := os.ReadFile(keysFile)
	if err != nil {
		t.Fatalf("dev keys: %v", err)
	}
	if err := json.Unmarshal(b, &s.keys); err != nil {
		t.Fatalf("dev keys %s: %v", b, err)
	}
	return s
}

// awaitKill waits up to 60 s for the server's failpoint to kill it.
func (s *crashServer) awaitKill(t *testing.T) {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the server was not killed within 60 s of the grant (is it the failpoint build?); stderr:\n%s", s.stderr)
	}
}

// crashReply is a recorded answer.
type crashReply struct {
	status int
	header http.Header
	body   []byte
}

// send posts or gets with the admin key; a transport error returns it.
func (s *crashServer) send(t *testing.T, method, path, idemKey, body string) (crashReply, error) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+s.keys.Admin)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set(idempotency.HeaderKey, idemKey)
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		return crashReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return crashReply{status: resp.StatusCode, header: resp.Header, body: b}, err
}

func (s *crashServer) must(t *testing.T, want int, method, path, idemKey, body string) crashReply {
	t.Helper()
	r, err := s.send(t, method, path, idemKey, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	if r.status != want {
		t.Fatalf("%s %s: status %d, want %d; body %s", method, path, r.status, want, r.body)
	}
	return r
}

// countEntitlements returns how many entitlements agent has.
func (s *crashServer) countEntitlements(t *testing.T, agent string) int {
	t.Helper()
	var page struct{ Items []json.RawMessage }
	r := s.must(t, http.StatusOK, "GET", "/v1/accounts/"+agent+"/entitlements", "", "")
	if err := json.Unmarshal(r.body, &page); err != nil {
		t.Fatalf("entitlements page %s: %v", r.body, err)
	}
	return len(page.Items)
}

// ledgerCLI runs `stipend ledger args…` and returns its exit code and output.
func ledgerCLI(t *testing.T, bin, prefix string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"ledger"}, args...)...)
	cmd.Env = crashEnv(prefix)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("stipend ledger %v: %v", args, err)
	}
	return cmd.ProcessState.ExitCode(), stdout.String(), stderr.String()
}

// TestLedger_CrashAfterWriteBeforeCompletion kills the real server (SIGKILL,
// from the failpoint of the failpoint build) after an entitlement grant commits and before
// the ledger records it. The retry must get 409 with a sanitized reference;
// the operator inspects and completes the row by compare-and-set; the next
// retry replays, and the grant exists exactly once.
func TestLedger_CrashAfterWriteBeforeCompletion(t *testing.T) {
	emulator.Host(t)
	bin := stipendBinary(t, failpointTag)
	prefix := emulator.Prefix(t)
	const agent, key = "crash-agent", "grant-key-7f3a"
	grant := `{"type":"credits","scope":{"service":"search"},"balance":{"cents":500,"currency":"USD"}}`
	grantPath := "/v1/accounts/" + agent + "/entitlements"

	// 1. The write commits; the process dies before the ledger completes.
	first := startCrashServer(t, bin, prefix, failpointArm)
	first.must(t, http.StatusOK, "PUT", "/v1/accounts/"+agent, "", `{}`)
	if r, err := first.send(t, "POST", grantPath, key, grant); err == nil {
		t.Logf("the grant answered %d before the kill (the answer was flushed first)", r.status)
	}
	first.awaitKill(t)
	ws, ok := first.cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("first server ended with %v, want killed by SIGKILL; stderr:\n%s", first.cmd.ProcessState, first.stderr)
	}

	// 2. A new instance: the grant committed, and its key is held.
	second := startCrashServer(t, bin, prefix)
	if n := second.countEntitlements(t, agent); n != 1 {
		t.Fatalf("entitlements after the crash = %d, want 1 (the write committed)", n)
	}
	held := second.must(t, http.StatusConflict, "POST", grantPath, key, grant)
	var p problem.Problem
	if err := json.Unmarshal(held.body, &p); err != nil {
		t.Fatalf("409 body %s: %v", held.body, err)
	}
	wantRef := "firestore/" + idempotency.CollectionName(main.LedgerNamespace(prefix)) + "/" +
		idempotency.HashKey(main.LedgerNamespace(prefix), "POST /v1/accounts/:agentId/entitlements", key)
	if p.Reference != wantRef || p.OperationID == "" {
		t.Fatalf("409 reference %q, operationId %q; want %q and an operation id", p.Reference, p.OperationID, wantRef)
	}
	if strings.Contains(string(held.body), key) || strings.Contains(second.stderr.String(), key) {
		t.Errorf("the raw key appears in the 409 body or the logs")
	}

	// 3. The operator inspects the row and proves the write happened.
	code, out, errOut := ledgerCLI(t, bin, prefix, "inspect", p.Reference)
	if code != 0 {
		t.Fatalf("ledger inspect: exit %d\n%s", code, errOut)
	}
	var row struct {
		State, UpdateTime, OperationID, WrittenAt string
		Fenced                                    bool
	}
	if err := json.Unmarshal([]byte(out), &row); err != nil {
		t.Fatalf("ledger inspect output %s: %v", out, err)
	}
	if row.State != "in_progress" || row.OperationID != p.OperationID {
		t.Fatalf("inspected row: state %q, operationId %q; want in_progress, %q", row.State, row.OperationID, p.OperationID)
	}
	if !row.Fenced || row.WrittenAt == "" {
		t.Errorf("inspected row: fenced %v, writtenAt %q; want fenced and marked written (the grant committed)", row.Fenced, row.WrittenAt)
	}
	list := second.must(t, http.StatusOK, "GET", grantPath, "", "")
	var page struct{ Items []json.RawMessage }
	if err := json.Unmarshal(list.body, &page); err != nil || len(page.Items) != 1 {
		t.Fatalf("entitlements page %s: %v", list.body, err)
	}
	respFile := filepath.Join(t.TempDir(), "response.json")
	fileBody, _ := json.Marshal(map[string]any{"status": 201, "body": page.Items[0]})
	if err := os.WriteFile(respFile, fileBody, 0o600); err != nil {
		t.Fatal(err)
	}

	// 4. Compare-and-set: a stale update time is refused, the inspected one wins.
	code, _, errOut = ledgerCLI(t, bin, prefix, "resolve", p.Reference, "--complete-with", respFile, "--update-time", "2020-01-01T00:00:00Z")
	if code != 1 || !strings.Contains(errOut, "changed") {
		t.Fatalf("resolve with a stale update time: exit %d, stderr %q; want 1 and a conflict", code, errOut)
	}
	code, _, errOut = ledgerCLI(t, bin, prefix, "resolve", p.Reference, "--complete-with", respFile, "--update-time", row.UpdateTime)
	if code != 0 {
		t.Fatalf("resolve --complete-with: exit %d\n%s", code, errOut)
	}

	// 5. The retry replays the proven answer; the grant still exists once.
	replayed := second.must(t, http.StatusCreated, "POST", grantPath, key, grant)
	if replayed.header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("retry after resolve: %s = %q, want true", idempotency.HeaderReplayed, replayed.header.Get(idempotency.HeaderReplayed))
	}
	if !bytes.Equal(replayed.body, page.Items[0]) {
		t.Errorf("replayed body %s, want the committed entitlement %s", replayed.body, page.Items[0])
	}
	if n := second.countEntitlements(t, agent); n != 1 {
		t.Errorf("entitlements after the replay = %d, want 1", n)
	}
}

// TestLedger_CrashBeforeWriteHeals kills the real server (SIGKILL, from
// the failpoint build's ledger-before-handler failpoint) once a grant's key
// is reserved and before the grant is written: what left keys at 409 until
// an operator acted. A new instance answers 409 while the row is younger
// than the handler's bound; once it is older (here the test setting makes
// the bound 1 ms), the next request proves through the fence that nothing
// was written, reclaims the key and grants, once.
func TestLedger_CrashBeforeWriteHeals(t *testing.T) {
	emulator.Host(t)
	bin := stipendBinary(t, failpointTag)
	prefix := emulator.Prefix(t)
	const agent, key = "crash-agent-early", "grant-key-0b1c"
	grant := `{"type":"credits","scope":{"service":"search"},"balance":{"cents":500,"currency":"USD"}}`
	grantPath := "/v1/accounts/" + agent + "/entitlements"

	first := startCrashServer(t, bin, prefix, "STIPEND_TEST_FAILPOINT=ledger-before-handler")
	first.must(t, http.StatusOK, "PUT", "/v1/accounts/"+agent, "", `{}`)
	if r, err := first.send(t, "POST", grantPath, key, grant); err == nil {
		t.Fatalf("the grant answered %d; want the process killed before it ran", r.status)
	}
	first.awaitKill(t)

	second := startCrashServer(t, bin, prefix)
	if n := second.countEntitlements(t, agent); n != 0 {
		t.Fatalf("entitlements after the crash = %d, want 0 (the grant never ran)", n)
	}
	second.must(t, http.StatusConflict, "POST", grantPath, key, grant)

	third := startCrashServer(t, bin, prefix, "STIPEND_TEST_LEDGER_RECLAIM_AFTER=1ms")
	third.must(t, http.StatusCreated, "POST", grantPath, key, grant)
	if !strings.Contains(third.stderr.String(), "reclaimed") {
		t.Errorf("the third server logged no reclaim:\n%s", third.stderr)
	}
	replayed := second.must(t, http.StatusCreated, "POST", grantPath, key, grant)
	if replayed.header.Get(idempotency.HeaderReplayed) != "true" {
		t.Errorf("the next retry: %s = %q, want a replay", idempotency.HeaderReplayed, replayed.header.Get(idempotency.HeaderReplayed))
	}
	if n := second.countEntitlements(t, agent); n != 1 {
		t.Errorf("entitlements after the healed grant = %d, want 1", n)
	}
}
