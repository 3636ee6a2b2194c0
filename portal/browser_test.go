package portal_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/internal/nodetest"
	"github.com/stipend-mcp/stipend/internal/stripemock"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
)

// chromium is Debian's Chromium, which scripts/chromium installs.
const chromium = "/usr/bin/chromium"

// TestBrowser runs the wallet's browser suite (portal/web/test, npm
// playwright-core driving headless Chromium) against a real `stipend
// serve` (memory store, stripe-mock for Checkout) and, for the MCP App, a
// gate with the wallet whose MCP connection this test holds for the host
// page: the page renders ui://stipend/wallet as hosts do and reaches the
// server through hostBackend. It skips without node, npm, Chromium or
// stripe-mock, except under CI=true, where it fails.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser; skipped with -short")
	}
	node, npm := nodetest.Tools(t)
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing and CI=true (scripts/chromium installs it)", chromium)
		}
		t.Skipf("%s is missing (scripts/chromium installs it); skipping", chromium)
	}
	stripeURL := stripemock.URL(t)
	nodetest.CI(t, npm, "web")

	dir := t.TempDir()
	srv := startServe(t, dir, stripeURL)
	expiring := srv.mint(t, "alice", 60) // checked last, once expired
	srv.seed(t)
	session := srv.mint(t, "alice", 3600)
	host := startHostBackend(t, srv)

	cmd := exec.CommandContext(t.Context(), node, "--test", "--test-reporter=spec", "test/wallet.test.mjs")
	cmd.Dir = "web"
	cmd.Env = append(os.Environ(),
		"CHROMIUM="+chromium,
		"STIPEND_URL="+srv.url,
		"PORTAL_URL="+session.URL,
		"EXPIRING_URL="+expiring.URL,
		"EXPIRING_AT="+expiring.ExpiresAt.Format(time.RFC3339Nano),
		"HOST_BACKEND="+host,
		"WORK_DIR="+dir,
	)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test web/test/wallet.test.mjs: %v\n%s\nstipend serve's log:\n%s", err, out, srv.log())
	}
	t.Logf("%s", out)
}

// served is a running `stipend serve` and clients with its dev keys.
type served struct {
	url                  string
	logPath              string
	host, billing, admin *client.Client
}

func (s *served) log() string {
	b, _ := os.ReadFile(s.logPath)
	return string(b)
}

// startServe builds and starts `stipend serve` on a free loopback port,
// with the Stripe API at stripeURL, and waits until it answers.
func startServe(t *testing.T, dir, stripeURL string) *served {
	t.Helper()
	bin := filepath.Join(dir, "stipend")
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "./cmd/stipend")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/stipend: %v\n%s", err, out)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	keyFile := filepath.Join(dir, "stripe-key")
	if err := os.WriteFile(keyFile, []byte(stripemock.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &served{url: "http://" + addr, logPath: filepath.Join(dir, "serve.log")}
	logFile, err := os.Create(s.logPath)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	keysOut := filepath.Join(dir, "dev-keys.json")
	cmd := exec.CommandContext(ctx, bin, "serve", "--addr", addr, "--dev-keys-out", keysOut,
		"--stripe-secret-key-file", keyFile, "--stripe-api-url", stripeURL, "--stripe-sweep-interval", "0",
		"--webhook-concurrency", "0", "--hold-sweep-interval", "0")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait(); logFile.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		res, err := http.Get(s.url + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("stipend serve did not answer /healthz; its log:\n%s", s.log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	var keys struct{ Host, Billing, Admin string }
	b, err := os.ReadFile(keysOut)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &keys); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		dst **client.Client
		key string
	}{{&s.host, keys.Host}, {&s.billing, keys.Billing}, {&s.admin, keys.Admin}} {
		if *c.dst, err = client.New(s.url, c.key); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// mint mints a portal session of agent lasting ttl seconds.
func (s *served) mint(t *testing.T, agent string, ttl int64) *client.PortalSession {
	t.Helper()
	ps, err := s.billing.CreatePortalSession(t.Context(), uuid.NewString(), client.PortalSessionRequest{AgentID: agent, TTLSeconds: ttl})
	if err != nil {
		t.Fatalf("CreatePortalSession(%s): %v", agent, err)
	}
	return ps
}

func usd(cents int64) *money.Money { return &money.Money{Cents: cents, Currency: "USD"} }

// seed gives alice what the wallet shows: two paid top-ups (receipts),
// calls of two tools, one of them refunded, and a hold.
func (s *served) seed(t *testing.T) {
	t.Helper()
	ctx := t.Context()
	for i, cents := range []int64{2000, 1500} {
		p, _, err := s.billing.CreatePayment(ctx, fmt.Sprintf("seed-pay-%d", i), client.PaymentRequest{
			AgentID: "alice", Amount: *usd(cents), Provider: payment.ProviderManual, Description: "credits",
			Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "*"}},
		})
		if err != nil {
			t.Fatalf("CreatePayment: %v", err)
		}
		if _, err := s.billing.SucceedPayment(ctx, p.ID); err != nil {
			t.Fatalf("SucceedPayment: %v", err)
		}
	}
	var first string
	for i, call := range []struct {
		tool  string
		cents int64
	}{{"query", 25}, {"query", 25}, {"summarize", 120}, {"query", 25}, {"translate", 60}} {
		res, err := s.host.Consume(ctx, client.ConsumeRequest{AgentID: "alice", Service: "search", Tool: call.tool,
			IdempotencyKey: fmt.Sprintf("seed-call-%d", i), Cost: usd(call.cents)})
		if err != nil {
			t.Fatalf("Consume: %v", err)
		}
		if i == 0 {
			first = res.Consumption.ID
		}
	}
	if _, err := s.billing.RefundConsumption(ctx, first, "seed-refund", client.RefundRequest{}); err != nil {
		t.Fatalf("RefundConsumption: %v", err)
	}
	if _, err := s.host.Authorize(ctx, client.AuthorizeRequest{AgentID: "alice", Service: "search", Tool: "crawl",
		IdempotencyKey: "seed-hold", MaxCost: usd(300), TTLSeconds: 3600}); err != nil {
		t.Fatalf("Authorize: %v", err)
	}
}

// startHostBackend serves, on loopback, the MCP side of the test host
// page: an MCP server with a paid tool and the wallet (mcpgate; the gate
// charges with the host key and mints with the billing key), connected
// over an in-memory transport to this test's client; the host page itself
// (GET /host); and two routes the page calls: GET /resource
// (resources/read of ui://stipend/wallet) and POST /call?agent=A
// (tools/call of the body's {name, arguments} as A).
func startHostBackend(t *testing.T, s *served) string {
	t.Helper()
	g, err := mcpgate.New(mcpgate.Config{Stipend: s.host, Service: "search",
		Prices: map[string]mcpgate.Price{"query": mcpgate.Credits(25, "USD")}})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "search", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "query", InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "results"}}}, nil
		})
	if err := g.AddWallet(server, mcpgate.WalletConfig{Minter: s.billing, StipendURL: s.url}); err != nil {
		t.Fatal(err)
	}
	server.AddReceivingMiddleware(g.Middleware)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := server.Connect(t.Context(), mcpgate.Transport(st), nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-host", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close(); ss.Close() })

	mux := http.NewServeMux()
	answer := func(w http.ResponseWriter, v any, err error) {
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	// The host page's own origin: loopback http is a secure context, as a
	// real host's https page is (the app's WebCrypto needs one).
	mux.HandleFunc("GET /host", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><html><head><title>MCP Apps host (test)</title></head><body></body></html>"))
	})
	mux.HandleFunc("GET /resource", func(w http.ResponseWriter, r *http.Request) {
		rr, err := cs.ReadResource(r.Context(), &mcp.ReadResourceParams{URI: mcpgate.WalletURI})
		answer(w, rr, err)
	})
	mux.HandleFunc("POST /call", func(w http.ResponseWriter, r *http.Request) {
		var p struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := cs.CallTool(r.Context(), &mcp.CallToolParams{Name: p.Name, Arguments: p.Arguments,
			Meta: mcp.Meta{mcpgate.MetaAgentID: r.URL.Query().Get("agent"), mcpgate.MetaIdempotencyKey: uuid.NewString()}})
		answer(w, res, err)
	})
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	if !strings.HasPrefix(hs.URL, "http://127.0.0.1:") {
		t.Fatalf("host backend at %s, want loopback", hs.URL)
	}
	return hs.URL
}
