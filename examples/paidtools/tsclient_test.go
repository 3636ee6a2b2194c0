package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stipend-mcp/stipend/internal/nodetest"
)

// tsclientDir is the Node.js project of the TypeScript-client tests.
var tsclientDir = filepath.Join("testdata", "tsclient")

// TestPaidTools_TypeScriptClient runs the tests in testdata/tsclient: the
// official MCP TypeScript SDK's Client against the built example, over stdio
// and streamable HTTP, charging through a real Stipend (memory store). It
// skips without node and npm, except under CI=true, where it fails.
func TestPaidTools_TypeScriptClient(t *testing.T) {
	node, npm := nodetest.Tools(t)
	nodetest.CI(t, npm, tsclientDir)
	bin := buildExample(t)
	ts, keys := startStipend(t)

	cmd := exec.CommandContext(t.Context(), node, "--test")
	cmd.Dir = tsclientDir
	cmd.Env = append(os.Environ(),
		"PAIDTOOLS_BIN="+bin, "STIPEND_URL="+ts.URL,
		"STIPEND_HOST_KEY="+keys.host, "STIPEND_BILLING_KEY="+keys.billing)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test in %s: %v\n%s", tsclientDir, err, out)
	}
	t.Logf("node --test:\n%s", out)
}

// buildExample builds this example into a temporary directory.
func buildExample(t *testing.T) string {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed to build the example: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "paidtools")
	cmd := exec.CommandContext(t.Context(), goTool, "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
