package api_test

import (
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/store"
)

// TestMetrics_StoreErrorsFromStart: a fresh server exports a zero series of
// stipend_store_errors_total for every store code, before any error, so
// rates and alerts on it work from the first scrape.
func TestMetrics_StoreErrorsFromStart(t *testing.T) {
	e := newEnv(t)
	body := string(e.must(200, req{Method: "GET", Path: "/metrics"}).Body)
	for _, code := range store.Codes() {
		if want := `stipend_store_errors_total{code="` + string(code) + `"} 0`; !strings.Contains(body, want) {
			t.Errorf("/metrics of a fresh server lacks %s", want)
		}
	}
}
