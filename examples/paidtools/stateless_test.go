package main

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
)

// TestPaidTools_StatelessTwoInstances serves the example as stateless
// streamable HTTP (MCP 2026-07-28) from two instances, each with its own
// gate, behind one address that sends each request to the next instance:
// a call sent again with the client's idempotency key lands on the other
// instance and is charged once; the same call sent twice without a key is
// two calls, charged twice.
func TestPaidTools_StatelessTwoInstances(t *testing.T) {
	ts, keys := startStipend(t)
	billing := keys.billingClient(t, ts.URL)
	pay(t, billing, "pay-stateless", 20)
	var backends []*url.URL
	for range 2 {
		addr := serveExample(t, ts.URL, keys.host, &mcp.StreamableHTTPOptions{Stateless: true})
		backends = append(backends, &url.URL{Scheme: "http", Host: addr})
	}
	var posts [2]atomic.Int64
	var n atomic.Int64
	proxy := httptest.NewServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		i := n.Add(1) % 2
		if r.In.Method == http.MethodPost {
			posts[i].Add(1)
		}
		r.SetURL(backends[i])
	}})
	t.Cleanup(proxy.Close)

	transport := &mcp.StreamableClientTransport{Endpoint: proxy.URL + "/mcp"}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-stateless", Version: "1"}, nil).Connect(t.Context(), transport, nil)
	if err != nil {
		t.Fatalf("client Connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })

	oslo := map[string]any{"city": "Oslo"}
	before := [2]int64{posts[0].Load(), posts[1].Load()}
	first := charged(t, call(t, cs, "forecast", "retry-1", oslo))
	retry := charged(t, call(t, cs, "forecast", "retry-1", oslo))
	if posts[0].Load() == before[0] || posts[1].Load() == before[1] {
		t.Fatalf("the two calls were not served by both instances: posts %d, %d (before %v)", posts[0].Load(), posts[1].Load(), before)
	}
	if first.Result != client.ResultConsumed || retry.Result != client.ResultReplay || retry.ConsumptionID != first.ConsumptionID {
		t.Errorf("call and its retry on the other instance = %s %s, %s %s; want consumed, then a replay of it",
			first.Result, first.ConsumptionID, retry.Result, retry.ConsumptionID)
	}
	if !cmp.Equal(usd(15), first.BalanceAfter) {
		t.Errorf("balance after the call = %v, want 15 cents", first.BalanceAfter)
	}
	// Without a key a retry cannot be told from a new call: charged again.
	a := charged(t, call(t, cs, "forecast", "", oslo))
	b := charged(t, call(t, cs, "forecast", "", oslo))
	if a.ConsumptionID == b.ConsumptionID || !cmp.Equal(usd(5), b.BalanceAfter) {
		t.Errorf("the same call twice without a key = %s then %s leaving %v; want two charges leaving 5 cents", a.ConsumptionID, b.ConsumptionID, b.BalanceAfter)
	}
}
