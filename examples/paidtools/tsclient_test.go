package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// tsclientDir is the Node.js project of the TypeScript-client tests.
var tsclientDir = filepath.Join("testdata", "tsclient")

// TestPaidTools_TypeScriptClient runs the tests in testdata/tsclient: the
// official MCP TypeScript SDK's Client against the built example, over stdio
// and streamable HTTP, charging through a real Stipend (memory store). It
// skips without node and npm, except under CI=true, where it fails.
func TestPaidTools_TypeScriptClient(t *testing.T) {
	node, npm := nodeTools(t)
	npmCI(t, npm)
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

// nodeTools finds node and npm, or skips the test (fails it under CI=true).
func nodeTools(t *testing.T) (node, npm string) {
	t.Helper()
	node, errNode := exec.LookPath("node")
	npm, errNpm := exec.LookPath("npm")
	if errNode == nil && errNpm == nil {
		return node, npm
	}
	msg := "the TypeScript-client tests need node and npm on PATH (Node.js 20 or newer)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s; CI=true, so this fails instead of skipping", msg)
	}
	t.Skip(msg + "; skipping")
	return "", ""
}

// npmCI installs the locked dependencies with npm ci, unless node_modules
// already holds an install of this very package-lock.json (a stamp file
// records its hash). npm ci starts from an empty node_modules, so a fresh
// checkout and a changed lockfile both get a clean install.
func npmCI(t *testing.T, npm string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(tsclientDir, "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(lock)
	want := []byte(hex.EncodeToString(sum[:]))
	stamp := filepath.Join(tsclientDir, "node_modules", ".stipend-lock-sha256")
	if got, err := os.ReadFile(stamp); err == nil && bytes.Equal(got, want) {
		return
	}
	cmd := exec.CommandContext(t.Context(), npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts", "--prefer-offline")
	cmd.Dir = tsclientDir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", tsclientDir, err, out)
	}
	if err := os.WriteFile(stamp, want, 0o644); err != nil {
		t.Fatal(err)
	}
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
