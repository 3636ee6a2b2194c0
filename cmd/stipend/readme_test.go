package main_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadme_GoVersion: the Go version the README asks for is go.mod's.
func TestReadme_GoVersion(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	if want := "You need Go " + string(m[1]) + " or later"; !strings.Contains(string(readme), want) {
		t.Errorf("README.md does not say %q (go.mod's go line)", want)
	}
}
