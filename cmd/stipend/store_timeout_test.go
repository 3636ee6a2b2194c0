package main_test

import (
	"net/http"
	"testing"
	"time"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/internal/emulator"
)

// TestMain_StoreTimeout runs the real program on Firestore behind a proxy
// that stops forwarding (a stalled Firestore): with --store-timeout 1s, a
// consume answers 503 within that and a small margin, not after the store's
// retry budget; once Firestore answers again, the retry with the same key
// charges the call once.
func TestMain_StoreTimeout(t *testing.T) {
	const (
		timeout = time.Second
		margin  = time.Second
	)
	proxy := emulator.NewProxy(t)
	m := startMainEnv(t, map[string]string{"FIRESTORE_EMULATOR_HOST": proxy.Host()},
		"--store", "firestore", "--firestore-project", emulator.ProjectID, "--collection-prefix", emulator.Prefix(t),
		"--store-timeout", timeout.String(), "--webhook-concurrency", "0", "--hold-sweep-interval", "0",
	)
	waitReady(t, m)
	grantCredits(t, m.URL(), m.DevKeys.Admin, main.DevAgent)

	proxy.Stall()
	start := time.Now()
	status, body := call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", m.DevKeys.Host, consumeBody("stalled"))
	took := time.Since(start)
	proxy.Resume()
	if status != http.StatusServiceUnavailable {
		t.Errorf("consume while Firestore stalls: status %d, body %v; want 503", status, body)
	}
	if took > timeout+margin {
		t.Errorf("consume while Firestore stalls: answered after %v, want within --store-timeout %v plus %v", took.Round(time.Millisecond), timeout, margin)
	}
	status, body = call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", m.DevKeys.Host, consumeBody("stalled"))
	if status != http.StatusOK || (body["result"] != "consumed" && body["result"] != "replay") {
		t.Errorf("the retry after the stall: status %d, body %v; want 200 consumed or replay", status, body)
	}
}
