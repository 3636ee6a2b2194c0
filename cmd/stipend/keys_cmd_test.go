package main_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/apikey"
	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/receipt"
)

func TestRunCommand_KeysAPI(t *testing.T) {
	code, stdout, stderr := runCommand(t, nil, "keys", "api", "--role", "reader", "--agents", "agent-a, agent-b", "--id", "ui-1")
	if code != 0 {
		t.Fatalf("keys api: exit %d, stderr %s", code, stderr)
	}
	var raw string
	for _, f := range strings.Fields(stdout) {
		if strings.HasPrefix(f, apikey.KeyPrefix) {
			raw = f
		}
	}
	if raw == "" {
		t.Fatalf("keys api printed no raw key:\n%s", stdout)
	}
	var entry apikey.Key
	if err := json.Unmarshal([]byte(stdout[strings.Index(stdout, "{"):]), &entry); err != nil {
		t.Fatalf("keys api entry: %v\n%s", err, stdout)
	}
	sum := sha256.Sum256([]byte(raw))
	want := apikey.Key{ID: "ui-1", Role: apikey.RoleReader, SHA256: hex.EncodeToString(sum[:]), Agents: []string{"agent-a", "agent-b"}}
	if entry.ID != want.ID || entry.Role != want.Role || entry.SHA256 != want.SHA256 || strings.Join(entry.Agents, ",") != "agent-a,agent-b" {
		t.Errorf("keys api entry = %+v, want %+v", entry, want)
	}
	set, err := apikey.NewSet([]apikey.Key{entry})
	if err != nil {
		t.Fatalf("the printed entry is not a valid key file entry: %v", err)
	}
	if _, ok := set.Lookup(raw); !ok {
		t.Errorf("the printed raw key does not match its entry")
	}
}

// TestRunCommand_KeysAPIJSON: --json prints one JSON object, the raw key and
// the key file entry that accepts it, for scripts.
func TestRunCommand_KeysAPIJSON(t *testing.T) {
	code, stdout, stderr := runCommand(t, nil, "keys", "api", "--role", "host", "--id", "mcp-1", "--json")
	if code != 0 {
		t.Fatalf("keys api --json: exit %d, stderr %s", code, stderr)
	}
	var got struct {
		RawKey string     `json:"rawKey"`
		Entry  apikey.Key `json:"entry"`
	}
	dec := json.NewDecoder(strings.NewReader(stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("keys api --json: stdout is not {rawKey, entry}: %v\n%s", err, stdout)
	}
	if dec.More() {
		t.Errorf("keys api --json: more than one JSON value on stdout:\n%s", stdout)
	}
	if got.Entry.ID != "mcp-1" || got.Entry.Role != apikey.RoleHost || !strings.HasPrefix(got.RawKey, apikey.KeyPrefix) {
		t.Errorf("keys api --json = %+v, want a host key with ID mcp-1", got)
	}
	set, err := apikey.NewSet([]apikey.Key{got.Entry})
	if err != nil {
		t.Fatalf("the printed entry is not a valid key file entry: %v", err)
	}
	if _, ok := set.Lookup(got.RawKey); !ok {
		t.Errorf("the printed raw key does not match its entry")
	}
}

// keysSigning runs `stipend keys signing args…` in process.
func keysSigning(t *testing.T, args []string, stdout, stderr *bytes.Buffer) int {
	t.Helper()
	return main.RunCommand(context.Background(), append([]string{"keys", "signing"}, args...), nil, stdout, stderr)
}

func TestKeysSigningCmd(t *testing.T) {
	path := filepath.Join(t.TempDir(), "signing.json")
	var stdout, stderr bytes.Buffer
	if code := keysSigning(t, []string{"--out", path}, &stdout, &stderr); code != 0 {
		t.Fatalf("keys signing --out %s = exit %d, want 0; stderr:\n%s", path, code, stderr.String())
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %v, want 0600", got)
	}
	k, err := receipt.LoadKeyFiles(path)
	if err != nil {
		t.Fatalf("LoadKeyFiles(written file): %v", err)
	}
	if got, want := strings.TrimSpace(stdout.String()), k.KeyID(); got != want {
		t.Errorf("keys signing printed %q, want the kid %q", got, want)
	}

	t.Run("RefusesToOverwrite", func(t *testing.T) {
		before, _ := os.ReadFile(path)
		var stdout, stderr bytes.Buffer
		if code := keysSigning(t, []string{"--out", path}, &stdout, &stderr); code == 0 {
			t.Fatal("keys signing over an existing file = exit 0, want non-zero")
		}
		if !strings.Contains(stderr.String(), "exists") {
			t.Errorf("stderr = %q, want it to say the file exists", stderr.String())
		}
		if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
			t.Error("keys signing changed the existing key file")
		}
	})
	t.Run("Stdout", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := keysSigning(t, []string{"--out", "-"}, &stdout, &stderr); code != 0 {
			t.Fatalf("keys signing --out - = exit %d; stderr:\n%s", code, stderr.String())
		}
		k, err := receipt.LoadKeyring(stdout.Bytes())
		if err != nil {
			t.Fatalf("LoadKeyring(stdout): %v", err)
		}
		if !strings.Contains(stderr.String(), k.KeyID()) {
			t.Errorf("stderr = %q, want the kid %s", stderr.String(), k.KeyID())
		}
	})
	t.Run("UnexpectedArgument", func(t *testing.T) {
		var stdout, stderr bytes.Buffer
		if code := keysSigning(t, []string{"extra"}, &stdout, &stderr); code != 2 {
			t.Errorf("keys signing extra = exit %d, want 2", code)
		}
	})
}
