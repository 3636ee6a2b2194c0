package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoFile reads the file at path from the repository's root.
func repoFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("../..", path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestReadme_GoVersion: the Go version the README asks for is go.mod's.
func TestReadme_GoVersion(t *testing.T) {
	mod := repoFile(t, "go.mod")
	readme := repoFile(t, "README.md")
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if want := "You need Go " + string(m[1]) + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line)", want)
	}
}

// TestDeployDoc_LogLines: the log lines docs/deploy-cloud-run.md tells an
// operator to look for are messages the binary logs, word for word.
func TestDeployDoc_LogLines(t *testing.T) {
	doc := repoFile(t, "docs/deploy-cloud-run.md")
	_, para, ok := strings.Cut(string(doc), "In Cloud Logging, the revision's first lines are")
	para, _, _ = strings.Cut(para, "\n\n")
	if !ok {
		t.Fatal("docs/deploy-cloud-run.md has no \"In Cloud Logging\" paragraph")
	}
	var src strings.Builder
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if !strings.HasSuffix(f, "_test.go") {
			b, _ := os.ReadFile(f)
			src.Write(b)
		}
	}
	msgs := regexp.MustCompile("`([a-z][^`]*)`").FindAllStringSubmatch(para, -1)
	if len(msgs) < 6 {
		t.Fatalf("found %d quoted log lines in the paragraph, want at least 6", len(msgs))
	}
	for _, m := range msgs {
		if !strings.Contains(src.String(), `Info("`+m[1]+`"`) && !strings.Contains(src.String(), `Warn("`+m[1]+`"`) {
			t.Errorf("docs/deploy-cloud-run.md quotes the log line %q, which stipend never logs", m[1])
		}
	}
}
