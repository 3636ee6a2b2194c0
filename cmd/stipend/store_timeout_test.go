package main_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/internal/emulator"
)

// TestMain_StoreTimeout runs the real program on Firestore behind a proxy
// that stops forwarding (a stalled Firestore): with --store-timeout 5s, a
// consume answers 503 within that and a small margin, not after the store's
// retry budget; once Firestore answers again, the retry with the same key
// charges the call once.
func TestMain_StoreTimeout(t *testing.T) {
	const (
		// Long enough for the calls before and after the stall on a
		// loaded emulator (seconds each), far below the 20 s retry budget
		// a stalled store took before.
		timeout = 5 * time.Second
		margin  = 2 * time.Second // scheduling and answering
	)
	proxy := emulator.NewProxy(t)
	m := startMainEnv(t, map[string]string{"FIRESTORE_EMULATOR_HOST": proxy.Host()},
		"--store", "firestore", "--firestore-project", emulator.ProjectID, "--collection-prefix", emulator.Prefix(t),
		"--store-timeout", timeout.String(), "--webhook-concurrency", "0", "--hold-sweep-interval", "0",
	)
	waitReady(t, m)
	// The grant goes through the API, bounded by the store timeout too; the
	// first transactions on a freshly started emulator may outlast it, so a
	// 503 is retried. A retry gets a new key: its first attempt may have
	// granted as well, which does no harm here.
	for try := 0; ; try++ {
		status, body := callIdempotent(t, http.DefaultClient, "POST", m.URL()+"/v1/accounts/"+main.DevAgent+"/entitlements",
			m.DevKeys.Admin, fmt.Sprint("grant-", try), map[string]any{"type": "credits", "scope": map[string]any{"service": "search"},
				"balance": map[string]any{"cents": 1000, "currency": "USD"}})
		if status == http.StatusCreated {
			break
		}
		if status != http.StatusServiceUnavailable || try == 30 {
			t.Fatalf("grant: status %d, body %v; want 201", status, body)
		}
	}

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
	for try := 0; try < 30; try++ { // as a client retries, with the same key
		if status, body = call(t, http.DefaultClient, "POST", m.URL()+"/v1/consume", m.DevKeys.Host, consumeBody("stalled")); status != http.StatusServiceUnavailable {
			break
		}
	}
	if status != http.StatusOK || (body["result"] != "consumed" && body["result"] != "replay") {
		t.Errorf("the retry after the stall: status %d, body %v; want 200 consumed or replay", status, body)
	}
}
