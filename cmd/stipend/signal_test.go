package main_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// TestBinary_SIGTERM builds the real binary, starts it, waits for its
// listening log line, checks /healthz and that SIGTERM ends it with exit 0.
func TestBinary_SIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := stipendBinary(t, "")

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0")
	cmd.Env = append(os.Environ(), "STIPEND_SHUTDOWN_TIMEOUT=5s")
	// An io.Pipe (not StderrPipe) so Wait waits for the output to be copied
	// while the scanner below keeps reading it.
	stderr, stderrW := io.Pipe()
	cmd.Stderr = stderrW
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })

	// The JSON log line {"message":"listening","addr":...} gives the port.
	lines := bufio.NewScanner(stderr)
	var addr string
	for addr == "" && lines.Scan() {
		var rec struct{ Message, Addr string }
		if json.Unmarshal(lines.Bytes(), &rec) == nil && rec.Message == "listening" {
			addr = rec.Addr
		}
	}
	if addr == "" {
		t.Fatalf("the binary never logged its listening address (scan error %v)", lines.Err())
	}
	go func() {
		for lines.Scan() { // drain, so the process never blocks on a full pipe
		}
	}()

	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /healthz: status %d, want 200", resp.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	stderrW.Close()
	if exitErr := (*exec.ExitError)(nil); errors.As(err, &exitErr) {
		t.Fatalf("after SIGTERM: exit code %d, want 0", exitErr.ExitCode())
	} else if err != nil {
		t.Fatalf("after SIGTERM: %v", err)
	}
}
