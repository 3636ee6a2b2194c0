package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/idempotency"
	"github.com/stipend-mcp/stipend/idempotency/fsledger"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
)

// runLedger runs `stipend ledger args…` in process with env.
func runLedger(env map[string]string, args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := main.RunCommand(context.Background(), append([]string{"ledger"}, args...), env, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestLedgerCmd_Usage(t *testing.T) {
	id := idempotency.HashKey("ns", "r", "k")
	ref := "firestore/idem_0123/" + id
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"NoSubcommand", nil, 2},
		{"Unknown", []string{"frobnicate"}, 2},
		{"InspectWithoutRef", []string{"inspect"}, 2},
		{"ResolveWithoutMode", []string{"resolve", ref, "--update-time", "2026-01-01T00:00:00Z"}, 2},
		{"ResolveBothModes", []string{"resolve", ref, "--delete", "--complete-with", "f.json", "--update-time", "2026-01-01T00:00:00Z"}, 2},
		{"ResolveWithoutUpdateTime", []string{"resolve", ref, "--delete"}, 2},
		{"ResolveBadUpdateTime", []string{"resolve", ref, "--delete", "--update-time", "yesterday"}, 2},
		{"RawKeyAsRef", []string{"inspect", "my-raw-key"}, 1},
		{"MemoryRef", []string{"inspect", "memory/idem_0123/" + id}, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if code, _, stderr := runLedger(nil, tc.args...); code != tc.want {
				t.Errorf("stipend ledger %q: exit %d, want %d; stderr %s", tc.args, code, tc.want, stderr)
			}
		})
	}
}

func TestLedgerCmd_Collection(t *testing.T) {
	code, out, _ := runLedger(map[string]string{"STIPEND_COLLECTION_PREFIX": "prod_"}, "collection")
	want := idempotency.CollectionName(main.LedgerNamespace("prod_"))
	if code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("stipend ledger collection: exit %d, output %q; want 0, %q", code, out, want)
	}
	_, other, _ := runLedger(nil, "collection", "--collection-prefix", "staging_")
	if strings.TrimSpace(other) == want {
		t.Errorf("two collection prefixes print one collection %q", want)
	}
}

// TestLedgerCmd_ProductionSettings: the operator commands run with the
// service's own production settings, whose serve-only requirements (API key
// and signing key files) they do not need.
func TestLedgerCmd_ProductionSettings(t *testing.T) {
	env := map[string]string{"STIPEND_ENV": "production", "STIPEND_STORE": "firestore", "STIPEND_COLLECTION_PREFIX": "prod_"}
	code, out, stderr := runLedger(env, "collection")
	if want := idempotency.CollectionName(main.LedgerNamespace("prod_")); code != 0 || strings.TrimSpace(out) != want {
		t.Errorf("stipend ledger collection with production settings: exit %d, output %q, stderr %s; want 0, %q", code, out, stderr, want)
	}
}

// TestLedgerCmd_RetentionDefaultsToTheService: a row completed by hand
// replays as long as the service's own answers do.
func TestLedgerCmd_RetentionDefaultsToTheService(t *testing.T) {
	ref := "firestore/idem_0123/" + idempotency.HashKey("ns", "r", "k")
	env := map[string]string{"STIPEND_LEDGER_RETENTION": "bogus"}
	// The service's setting is read (and a bad one refused, naming it) ...
	if code, _, stderr := runLedger(env, "resolve", ref, "--delete", "--update-time", "2026-01-01T00:00:00Z"); code != 2 || !strings.Contains(stderr, "STIPEND_LEDGER_RETENTION") {
		t.Errorf("resolve with a bad STIPEND_LEDGER_RETENTION: exit %d, stderr %s; want 2 naming the variable", code, stderr)
	}
	// ... and a zero one is refused too, naming the variable, whereas the
	// flag's own default was 24h whatever the service said.
	env["STIPEND_LEDGER_RETENTION"] = "0s"
	if code, _, stderr := runLedger(env, "resolve", ref, "--delete", "--update-time", "2026-01-01T00:00:00Z"); code != 2 || !strings.Contains(stderr, `STIPEND_LEDGER_RETENTION="0s": must be positive`) {
		t.Errorf("resolve with STIPEND_LEDGER_RETENTION=0s: exit %d, stderr %s; want 2, the variable named: must be positive", code, stderr)
	}
}

// TestLedgerCmd_InspectAndDelete reconciles a row whose write never
// happened: inspect, a refused stale delete, the delete, and the key is free.
func TestLedgerCmd_InspectAndDelete(t *testing.T) {
	ctx := context.Background()
	prefix := emulator.Prefix(t)
	l := fsledger.New(emulator.Client(t), idempotency.CollectionName(main.LedgerNamespace(prefix)))
	a := idempotency.Attempt{ID: idempotency.HashKey("ns", "POST /v1/payments/:id/refund", "k"), Route: "POST /v1/payments/:id/refund",
		Fingerprint: "f", OperationID: "op-1"}
	res, err := l.Reserve(ctx, a)
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	ref := l.Reference(a.ID)
	env := map[string]string{"FIRESTORE_EMULATOR_HOST": emulator.Host(t), "STIPEND_FIRESTORE_PROJECT": emulator.ProjectID}

	code, out, stderr := runLedger(env, "inspect", ref)
	if code != 0 {
		t.Fatalf("inspect: exit %d; %s", code, stderr)
	}
	var row struct{ Reference, State, Route, OperationID, UpdateTime string }
	if err := json.Unmarshal([]byte(out), &row); err != nil {
		t.Fatalf("inspect output %s: %v", out, err)
	}
	if row.Reference != ref || row.State != "in_progress" || row.Route != a.Route || row.OperationID != "op-1" {
		t.Errorf("inspect = %+v, want the reserved row", row)
	}
	if got, err := time.Parse(time.RFC3339Nano, row.UpdateTime); err != nil || !got.Equal(res.Record.UpdateTime) {
		t.Errorf("inspect updateTime %q, want %s", row.UpdateTime, res.Record.UpdateTime.Format(time.RFC3339Nano))
	}

	stale := res.Record.UpdateTime.Add(-time.Second).Format(time.RFC3339Nano)
	if code, _, stderr := runLedger(env, "resolve", ref, "--delete", "--update-time", stale); code != 1 || !strings.Contains(stderr, "inspect it again") {
		t.Errorf("resolve --delete with a stale time: exit %d, stderr %q; want 1 and advice to inspect again", code, stderr)
	}
	if code, _, stderr := runLedger(env, "--update-time", row.UpdateTime, "resolve", ref, "--delete"); code != 2 {
		t.Errorf("flags before the subcommand: exit %d (%s), want 2", code, stderr)
	}
	if code, _, stderr := runLedger(env, "resolve", "--update-time", row.UpdateTime, ref, "--delete"); code != 0 {
		t.Fatalf("resolve --delete: exit %d; %s", code, stderr)
	}
	if _, err := l.Get(ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get after resolve --delete: %v, want not found", err)
	}
	if code, _, _ := runLedger(env, "inspect", ref); code != 1 {
		t.Errorf("inspect of a deleted row: exit %d, want 1", code)
	}
}
