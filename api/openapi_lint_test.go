package api_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stipend-mcp/stipend/internal/nodetest"
)

// lintDir is the Node.js project that pins the linter (package.json and its
// lockfile) and its rules (redocly.yaml).
var lintDir = filepath.Join("testdata", "openapi-lint")

// TestOpenAPI_Lint runs a third party's reading of OpenAPI 3.1 on
// openapi.json: Redocly CLI's linter with the rules of
// testdata/openapi-lint/redocly.yaml (its recommended set, warnings as
// errors). It skips without node and npm, except under CI=true, where it
// fails.
func TestOpenAPI_Lint(t *testing.T) {
	node, npm := nodetest.Tools(t)
	nodetest.CI(t, npm, lintDir)
	cmd := exec.CommandContext(t.Context(), node, filepath.Join("node_modules", "@redocly", "cli", "bin", "cli.js"),
		"lint", "--config", "redocly.yaml", "--format", "stylish", filepath.Join("..", "..", "openapi.json"))
	cmd.Dir = lintDir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("redocly lint openapi.json: %v\n%s", err, out)
	}
}
