package main_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	main "github.com/stipend-mcp/stipend/cmd/stipend"
	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/internal/pgtest"
	"github.com/stipend-mcp/stipend/internal/syncbuf"
)

// TestMain_ShutdownUnderLoad closes the real program (what SIGTERM does)
// while 16 callers charge one entitlement, on each store, and then checks
// that no goroutine of the program is left: the background loops, the
// store's lanes, lease timers and readers all stopped before the store's
// client or pool closed, and none of them touches it afterwards.
func TestMain_ShutdownUnderLoad(t *testing.T) {
	stores := []struct {
		name string
		args func(t *testing.T) ([]string, map[string]string)
	}{
		{"Memory", func(*testing.T) ([]string, map[string]string) { return nil, nil }},
		{"Postgres", func(t *testing.T) ([]string, map[string]string) {
			return []string{"--store", "postgres", "--postgres-url", pgtest.SchemaURL(t)}, nil
		}},
		{"Firestore", func(t *testing.T) ([]string, map[string]string) {
			env := map[string]string{"FIRESTORE_EMULATOR_HOST": emulator.Host(t)}
			return []string{"--store", "firestore", "--firestore-project", emulator.ProjectID,
				"--collection-prefix", emulator.Prefix(t)}, env
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			args, env := st.args(t) // may start nothing, or skip
			before := goleak.IgnoreCurrent()

			m := main.NewMain()
			m.Stdout, m.Stderr = &syncbuf.Buffer{}, &syncbuf.Buffer{}
			if err := m.ParseFlags(append([]string{"--addr", "127.0.0.1:0", "--hold-sweep-interval", "50ms", "--store-timeout", "10s"}, args...), env); err != nil {
				t.Fatal(err)
			}
			if err := m.Run(context.Background()); err != nil {
				t.Fatalf("Run: %v", err)
			}
			client := &http.Client{Transport: &http.Transport{}}
			var (
				status int
				body   map[string]any
			)
			// A cold emulator may answer the first requests late (503):
			// retrying with the same Idempotency-Key is safe.
			for try := 0; try < 5 && status != http.StatusCreated; try++ {
				status, body = callIdempotent(t, client, "POST", m.URL()+"/v1/accounts/"+main.DevAgent+"/entitlements", m.DevKeys.Admin, "grant", map[string]any{
					"type": "credits", "scope": map[string]any{"service": "search"},
					"balance": map[string]any{"cents": 1_000_000, "currency": "USD"},
				})
			}
			if status != http.StatusCreated {
				t.Fatalf("grant: status %d, body %v", status, body)
			}

			url := m.URL() // Close resets what URL reads
			var (
				stop     atomic.Bool
				consumed atomic.Int64
				wg       sync.WaitGroup
			)
			for w := range 16 {
				wg.Go(func() {
					for i := 0; !stop.Load(); i++ {
						ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
						if consumeOnce(ctx, client, url, m.DevKeys.Host, fmt.Sprintf("w%d-%d", w, i)) {
							consumed.Add(1)
						}
						cancel()
					}
				})
			}
			for consumed.Load() < 50 {
				time.Sleep(5 * time.Millisecond) // until the load runs
			}
			if err := m.Close(); err != nil {
				t.Errorf("Close under load: %v", err)
			}
			stop.Store(true)
			wg.Wait()
			client.CloseIdleConnections()
			noLeaks(t, before)
		})
	}
}

// consumeOnce sends one consume of 1 cent and reports whether it charged.
func consumeOnce(ctx context.Context, client *http.Client, url, key, idemKey string) bool {
	b := fmt.Sprintf(`{"agentId":%q,"service":"search","tool":"web","idempotencyKey":%q,"cost":{"cents":1,"currency":"USD"}}`, main.DevAgent, idemKey)
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/consume", strings.NewReader(b))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// noLeaks fails t if goroutines other than those of before are still
// running 10 s from now: a closed connection's goroutines (gRPC's, pgx's)
// end soon after Close, later on a loaded machine.
func noLeaks(t *testing.T, before goleak.Option) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	// TestMain_EmulatorFromItsEnvironment leaves one connection behind: the
	// Firestore library dials the emulator its process environment names (an
	// unreachable port there) before Stipend's own option replaces it, and
	// nothing can close it. It keeps trying to connect, in goroutines that
	// start after before was taken. Only in tests: the binary's environment
	// is its process environment (cmd/stipend/firestore.go).
	ignore := goleak.IgnoreTopFunction("google.golang.org/grpc.(*addrConn).resetTransportAndUnlock")
	for {
		err := goleak.Find(before, ignore)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("goroutines still running 10 s after Close: %v", err)
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}
