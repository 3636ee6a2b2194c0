package main_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServe_DevKeysOutOnBusyPort: a second server whose port is taken exits
// 1 and leaves the key file of the first one alone.
func TestServe_DevKeysOutOnBusyPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	keysFile := filepath.Join(t.TempDir(), "dev-keys.json")
	const first = `{"host": "the running server's key"}`
	if err := os.WriteFile(keysFile, []byte(first), 0o600); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := runCommand(t, nil, "serve", "--addr", ln.Addr().String(), "--dev-keys-out", keysFile)
	if code != 1 || !strings.Contains(stderr, "listen on "+ln.Addr().String()) {
		t.Errorf("serve on a busy port: exit %d, stderr %q; want 1 and the listen error", code, stderr)
	}
	got, err := os.ReadFile(keysFile)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != first {
		t.Errorf("serve on a busy port rewrote --dev-keys-out: got %s, want %s", got, first)
	}
}
