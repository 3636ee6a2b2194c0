package typescript_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stipend-mcp/stipend/internal/nodetest"
)

// The Node.js projects the suite needs, in install order: the package, then
// the examples that link to it (file:../../typescript).
var nodeProjects = []string{".", filepath.Join("..", "examples", "paidtools-ts"), filepath.Join("..", "examples", "paidtools-ts2")}

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
	_, npm := nodetest.Tools(t)
	for _, dir := range nodeProjects {
		nodetest.CI(t, npm, dir)
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
