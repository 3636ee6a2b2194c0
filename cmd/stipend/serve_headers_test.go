package main_test

import (
	"net/http"
	"strings"
	"testing"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
)

// TestMain_MaxHeaderBytes: the server bounds request headers at
// main.MaxHeaderBytes, not at net/http's default of 1 MiB.
func TestMain_MaxHeaderBytes(t *testing.T) {
	m := startMain(t)
	url := "http://" + m.Addr() + "/healthz"
	send := func(size int) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Filler", strings.Repeat("a", size))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET /healthz with a %d-byte header: %v", size, err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := send(main.MaxHeaderBytes / 2); got != http.StatusOK {
		t.Errorf("GET /healthz with headers of half the limit: %d, want 200", got)
	}
	if got := send(2 * main.MaxHeaderBytes); got != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("GET /healthz with headers of twice the limit: %d, want 431", got)
	}
}
