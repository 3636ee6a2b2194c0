// Package nodetest runs the Node.js tools some Go tests drive (an npm
// package's own suite, a third-party linter): it finds node and npm, or
// skips the test (fails it under CI=true, where a missing tool is an error,
// never a skip), and installs a directory's locked dependencies with npm ci.
// Only tests import it.
package nodetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stipend-mcp/stipend/internal/testenv"
)

// Tools returns the paths of node and npm, or skips tb (fails it under
// CI=true) when either is not on PATH.
func Tools(tb testing.TB) (node, npm string) {
	tb.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode == nil && errNpm == nil {
		return node, npm
	}
	testenv.Missing(tb, "this test needs node and npm on PATH (Node.js 20.19 or newer)")
	return "", ""
}

// CI installs the dependencies locked in dir/package-lock.json with npm ci
// (no install scripts), unless dir/node_modules already holds an install of
// this very lockfile (a stamp file records its hash). npm ci starts from an
// empty node_modules, so a fresh checkout and a changed lockfile both get a
// clean install.
func CI(tb testing.TB, npm, dir string) {
	tb.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		tb.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := []byte(hex.EncodeToString(sum[:]))
	stamp := filepath.Join(dir, "node_modules", ".stipend-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && bytes.Equal(got, want) {
		return
	}
	cmd := exec.CommandContext(tb.Context(), npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, want, 0o644); err != nil {
		tb.Fatal(err)
	}
}
