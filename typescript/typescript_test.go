package typescript_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// The Node.js projects the suite needs, in install order: the package, then
// the example that links to it (file:../../typescript).
var nodeProjects = []string{".", filepath.Join("..", "examples", "paidtools-ts")}

// TestTypeScript runs the package's own suite (npm test): unit tests, the
// gate in process and over streamable HTTP, examples/paidtools-ts end to end
// over stdio and streamable HTTP, and the cross-gate test with
// examples/paidtools, all against the real stipend serve (memory store),
// which this test builds with the Go example. It installs the locked
// dependencies first (npm ci). It skips without node and npm, except under
// CI=true, where it fails.
func TestTypeScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the TypeScript suite; skipped with -short")
	}
	npm := nodeTools(t)
	for _, dir := range nodeProjects {
		npmCI(t, npm, dir)
	}
	bin := t.TempDir()
	goBuild(t, filepath.Join(bin, "stipend"), "./cmd/stipend")
	goBuild(t, filepath.Join(bin, "paidtools"), "./examples/paidtools")

	cmd := exec.CommandContext(t.Context(), npm, "test")
	cmd.Env = append(os.Environ(), "STIPEND_BIN="+filepath.Join(bin, "stipend"), "PAIDTOOLS_BIN="+filepath.Join(bin, "paidtools"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("npm test in typescript: %v\n%s", err, out)
	}
	t.Logf("npm test:\n%s", tail(out, 40))
}

// nodeTools finds node and npm and returns npm, or skips the test (fails it
// under CI=true).
func nodeTools(t *testing.T) string {
	t.Helper()
	_, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode == nil && errNpm == nil {
		return npm
	}
	msg := "the TypeScript tests need node and npm on PATH (Node.js 20 or newer)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI=true, so this fails instead of skipping", msg)
	}
	t.Skip(msg + "; skipping")
	return ""
}

// npmCI installs dir's locked dependencies with npm ci, unless its
// node_modules already holds an install of this very package-lock.json (a
// stamp file records its hash).
func npmCI(t *testing.T, npm, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := []byte(hex.EncodeToString(sum[:]))
	stamp := filepath.Join(dir, "node_modules", ".stipend-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && bytes.Equal(got, want) {
		return
	}
	cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
	}
	if err := os.WriteFile(stamp, want, 0o644); err != nil {
		t.Fatal(err)
	}
}

// goBuild builds the package pkg of the module into out.
func goBuild(t *testing.T, out, pkg string) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "build", "-o", out, pkg)
	cmd.Dir = ".."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
}

// tail is the last n lines of b.
func tail(b []byte, n int) []byte {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return bytes.Join(lines, []byte("\n"))
}
