package main_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"
)

// leaves are the commands that run something, with the usage line each
// prints (and the overview must print) for it.
var leaves = []struct{ path, line string }{
	{"serve", "stipend [serve] [flags]"},
	{"keys api", "stipend keys api --role ROLE [--agents a,b] [--id ID] [--json]"},
	{"keys signing", "stipend keys signing [--out FILE]"},
	{"receipt verify", "stipend receipt verify RECEIPT --jwks FILE|URL [--timeout D] [--json]"},
	{"ledger collection", "stipend ledger collection [--collection-prefix P]"},
	{"ledger inspect", "stipend ledger inspect REF [store flags]"},
	{"ledger resolve", "stipend ledger resolve REF --update-time T (--delete | --complete-with FILE) [--retention D] [store flags]"},
	{"version", "stipend version"},
	{"help", "stipend help [COMMAND]"},
}

// flagName finds the flags a usage line names.
var flagName = regexp.MustCompile(`--([a-z][a-z-]*)`)

// TestRunCommand_Help: --help and -h on every command path print its usage
// on stdout and exit 0; a leaf's usage starts with the line the overview
// gives it, and lists every flag that line names.
func TestRunCommand_Help(t *testing.T) {
	_, overview, _ := runCommand(t, nil, "help")
	all := make([]string, 0, len(leaves))
	for _, l := range leaves {
		all = append(all, l.line)
	}
	tests := []struct {
		path      string
		wantLines []string // each a line of stdout
		wantUsage string   // "" for a group or the overview
	}{
		{"", all, ""},
		{"help", all, ""},
		{"keys", all[1:3], ""},
		{"receipt", all[3:4], ""},
		{"ledger", all[4:7], ""},
	}
	for _, l := range leaves {
		if l.path != "serve" && l.path != "help" { // serve and help print the overview
			tests = append(tests, struct {
				path      string
				wantLines []string
				wantUsage string
			}{l.path, nil, "Usage: " + l.line})
		}
	}
	for _, tt := range tests {
		for _, help := range []string{"--help", "-h"} {
			args := append(strings.Fields(tt.path), help)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				code, stdout, stderr := runCommand(t, nil, args...)
				if code != 0 || stderr != "" {
					t.Errorf("stipend %s: exit %d, stderr %q; want 0 and nothing on stderr", strings.Join(args, " "), code, stderr)
				}
				if !strings.HasPrefix(stdout, "Usage:") {
					t.Errorf("stipend %s: stdout does not start with Usage:\n%s", strings.Join(args, " "), stdout)
				}
				lines := strings.Split(stdout, "\n")
				for _, want := range tt.wantLines {
					if !slices.Contains(lines, "  "+want) {
						t.Errorf("stipend %s: stdout lacks the line %q:\n%s", strings.Join(args, " "), want, stdout)
					}
				}
				if tt.wantUsage == "" {
					return
				}
				if lines[0] != tt.wantUsage {
					t.Errorf("stipend %s: first line %q, want %q", strings.Join(args, " "), lines[0], tt.wantUsage)
				}
				for _, m := range flagName.FindAllStringSubmatch(tt.wantUsage, -1) {
					if !strings.Contains(stdout, "\n  -"+m[1]+" ") && !strings.Contains(stdout, "\n  -"+m[1]+"\n") {
						t.Errorf("stipend %s: the usage line names --%s, but the flags do not list it:\n%s", strings.Join(args, " "), m[1], stdout)
					}
				}
			})
		}
	}
	for _, l := range leaves {
		if !slices.Contains(strings.Split(overview, "\n"), "  "+l.line) {
			t.Errorf("stipend help lacks the line %q:\n%s", l.line, overview)
		}
	}
}

// TestRunCommand_HelpCommand: `stipend help COMMAND` is `stipend COMMAND --help`.
func TestRunCommand_HelpCommand(t *testing.T) {
	for _, path := range []string{"keys", "keys api", "ledger resolve", "version"} {
		args := strings.Fields(path)
		_, want, _ := runCommand(t, nil, append(args, "--help")...)
		code, got, stderr := runCommand(t, nil, append([]string{"help"}, args...)...)
		if code != 0 || got != want {
			t.Errorf("stipend help %s: exit %d, stdout %q, stderr %q; want 0 and what %s --help prints:\n%s", path, code, got, stderr, path, want)
		}
	}
	if code, _, stderr := runCommand(t, nil, "help", "frobnicate"); code != 2 || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Errorf("stipend help frobnicate: exit %d, stderr %q; want 2, unknown command", code, stderr)
	}
}

func TestRunCommand_Version(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"--version"}, {"-version"}, {"serve", "--version"}, {"--addr", "127.0.0.1:0", "--version"}} {
		code, stdout, stderr := runCommand(t, nil, args...)
		if code != 0 || !strings.HasPrefix(stdout, "stipend ") || strings.Count(stdout, "\n") != 1 {
			t.Errorf("stipend %s: exit %d, stdout %q, stderr %q; want 0 and one line \"stipend VERSION\"", strings.Join(args, " "), code, stdout, stderr)
		}
	}
	if code, _, stderr := runCommand(t, nil, "version", "extra"); code != 2 || !strings.Contains(stderr, "Usage: stipend version") {
		t.Errorf("stipend version extra: exit %d, stderr %q; want 2 with the usage", code, stderr)
	}
}
