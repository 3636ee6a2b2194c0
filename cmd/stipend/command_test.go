package main_test

import (
	"bytes"
	"context"
	"strings"
	"testing"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
)

// runCommand runs the command line in-process and returns its exit code and output.
func runCommand(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = main.RunCommand(context.Background(), args, env, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunCommand_Usage(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStderr []string // substrings
		wantStdout []string
	}{
		{"UnknownCommand", []string{"frobnicate"}, nil, 2, []string{`unknown command "frobnicate"`, "Usage:"}, nil},
		{"UnknownFlag", []string{"--frobnicate"}, nil, 2, []string{"flag provided but not defined: -frobnicate", "Usage:"}, nil},
		{"UnknownServeFlag", []string{"serve", "--frobnicate"}, nil, 2, []string{"-frobnicate", "Usage:"}, nil},
		{"Help", []string{"help"}, nil, 0, nil, []string{"Usage:", "--signing-key-file", "STIPEND_SIGNING_KEY_FILE"}},
		{"ServeHelp", []string{"serve", "--help"}, nil, 0, nil, []string{"Usage:", "STIPEND_ADDR"}},
		{"Version", []string{"version"}, nil, 0, nil, []string{"stipend "}},
		{"KeysWithoutKind", []string{"keys"}, nil, 2, []string{"stipend keys api"}, nil},
		{"KeysAPIWithoutRole", []string{"keys", "api"}, nil, 2, []string{"--role is required"}, nil},
		{"KeysAPIBadRole", []string{"keys", "api", "--role", "root"}, nil, 2, []string{`"root" is not one of`}, nil},
		{"KeysAPIReaderWithoutAgents", []string{"keys", "api", "--role", "reader"}, nil, 2, []string{"reader keys"}, nil},
		{"KeysAPIUnknownFlag", []string{"keys", "api", "--roles", "host"}, nil, 2, []string{"-roles"}, nil},
		{"ReceiptWithoutVerify", []string{"receipt"}, nil, 2, []string{"receipt verify"}, nil},
		{"ProductionRefusesMemory", []string{"--env", "production"}, nil, 2, []string{"production refuses the memory store"}, nil},
		{"ProductionNeedsKeyFile", nil, map[string]string{"STIPEND_ENV": "production", "STIPEND_STORE": "firestore", "STIPEND_SIGNING_KEY_FILE": "s.json"}, 2, []string{"production needs an API key file"}, nil},
		{"ProductionNeedsSigningKey", []string{"--env=production", "--store=firestore", "--api-keys-file=k.json"}, nil, 2, []string{"production needs a receipt signing key"}, nil},
		{"MissingKeyFile", []string{"--addr", "127.0.0.1:0", "--api-keys-file", "/nonexistent/keys.json"}, nil, 1, []string{"api key file", "/nonexistent/keys.json"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCommand(t, tt.env, tt.args...)
			if code != tt.wantCode {
				t.Errorf("stipend %q: exit %d, want %d\nstderr: %s", tt.args, code, tt.wantCode, stderr)
			}
			for _, want := range tt.wantStderr {
				if !strings.Contains(stderr, want) {
					t.Errorf("stipend %q: stderr does not contain %q:\n%s", tt.args, want, stderr)
				}
			}
			for _, want := range tt.wantStdout {
				if !strings.Contains(stdout, want) {
					t.Errorf("stipend %q: stdout does not contain %q:\n%s", tt.args, want, stdout)
				}
			}
		})
	}
}
