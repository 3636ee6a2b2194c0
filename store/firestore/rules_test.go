package firestore_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/emulator"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// TestRules_DenyClients shows, with plain REST requests to the emulator
// (which scripts/test starts with firestore.rules.example loaded), that a
// client without the Admin path's "Authorization: Bearer owner" header can
// neither read nor write, while the Admin path reads the same document.
func TestRules_DenyClients(t *testing.T) {
	host := emulator.Host(t)
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
