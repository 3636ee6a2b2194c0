package main

import (
	"os"
	"strings"
	"testing"
)

// TestConfigurationDocs checks that docs/configuration.md names every
// setting's flag, environment variable and default.
func TestConfigurationDocs(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, s := range settings {
		row := "| `--" + s.flag + "` | `" + s.env + "` |"
		i := strings.Index(doc, row)
		if i < 0 {
			t.Errorf("docs/configuration.md has no row starting %q", row)
			continue
		}
		line, _, _ := strings.Cut(doc[i:], "\n")
		if s.def != "" && s.def != "false" && !strings.Contains(line, "`"+s.def+"`") {
			t.Errorf("docs/configuration.md row of --%s does not give the default %q:\n%s", s.flag, s.def, line)
		}
	}
}
