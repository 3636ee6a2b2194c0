package firestore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// firebaseJSON is the part of the repository's firebase.json that the
// Firebase CLI deploys to Firestore.
type firebaseJSON struct {
	Firestore struct {
		Rules   string `json:"rules"`
		Indexes string `json:"indexes"`
	} `json:"firestore"`
}

// TestFirebaseJSON_NamesTheTestedFiles: `firebase deploy` deploys the rules
// TestRules_DenyClients loads and the indexes TestQueries_HaveIndexes checks.
func TestFirebaseJSON_NamesTheTestedFiles(t *testing.T) {
	cfg := readJSON[firebaseJSON](t, "firebase.json")
	if got, want := cfg.Firestore.Indexes, "firestore.indexes.json"; got != want {
		t.Errorf("firebase.json firestore.indexes = %q, want %q (the file TestQueries_HaveIndexes checks)", got, want)
	}
	if cfg.Firestore.Rules == "" {
		t.Fatal("firebase.json names no firestore.rules file")
	}
	if _, err := os.Stat(filepath.Join("../..", cfg.Firestore.Rules)); err != nil {
		t.Errorf("firebase.json firestore.rules: %v", err)
	}
}

// TestRules_DenyClients loads the rules firebase.json names
// (firestore.rules.example) into the emulator and shows, with plain REST
// requests, that a client without the Admin path's "Authorization: Bearer
// owner" header can neither read nor write, while the Admin path reads the
// same document.
func TestRules_DenyClients(t *testing.T) {
	host := emulator.Host(t)
	loadRules(t, host, filepath.Join("../..", readJSON[firebaseJSON](t, "firebase.json").Firestore.Rules))
	prefix := emulator.Prefix(t)
	s := fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix))
	a, err := s.UpsertAccount(context.Background(), entitlement.Account{AgentID: "agent-rules"})
	if err != nil {
		t.Fatalf("UpsertAccount through the Admin path: %v", err)
	}
	base := "http://" + host + "/v1/projects/" + emulator.ProjectID + "/databases/(default)/documents/"
	doc := base + prefix + "accounts/" + a.AgentID

	tests := []struct {
		name, method, url, body, auth string
		want                          int
	}{
		{"UnauthenticatedRead", http.MethodGet, doc, "", "", http.StatusForbidden},
		{"UnauthenticatedWrite", http.MethodPatch, doc, `{"fields":{"displayName":{"stringValue":"x"}}}`, "", http.StatusForbidden},
		{"UnauthenticatedCreate", http.MethodPost, base + prefix + "receipts?documentId=forged", `{"fields":{}}`, "", http.StatusForbidden},
		{"AdminRead", http.MethodGet, doc, "", "Bearer owner", http.StatusOK},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, tc.url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if got := resp.StatusCode; got != tc.want {
				t.Errorf("%s %s: status %d, want %d; body: %s", tc.method, tc.url, got, tc.want, body)
			}
		})
	}
}

// loadRules makes the rules file at path the emulator's rules for
// emulator.ProjectID, whoever started the emulator and with whatever rules.
// The Admin path the other tests use ignores rules, so they are unaffected.
func loadRules(t *testing.T, host, path string) {
	t.Helper()
	rules, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		Name    string `json:"name"`
		Content string `json:"content"`
	}
	body, err := json.Marshal(map[string]any{"rules": map[string]any{"files": []file{{Name: "firestore.rules", Content: string(rules)}}}})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + host + "/emulator/v1/projects/" + emulator.ProjectID + ":securityRules"
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("PUT %s: %v", url, err)
	}
	defer resp.Body.Close()
	if got, _ := io.ReadAll(resp.Body); resp.StatusCode != http.StatusOK {
		t.Fatalf("PUT %s (loading %s): status %d, want 200; body: %s", url, path, resp.StatusCode, got)
	}
}
