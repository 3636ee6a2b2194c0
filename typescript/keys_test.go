package typescript_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/mcpgate"
	"github.com/stipend-mcp/stipend/money"
)

var update = flag.Bool("update", false, "rewrite testdata/idempotency-keys.json with the keys the Go gate derives")

// vectorsFile holds the idempotency keys the Go gate derives for a set of
// tools/call requests; the TypeScript gate's unit tests derive the same keys
// from the same requests.
var vectorsFile = filepath.Join("testdata", "idempotency-keys.json")

// keyVector is one tools/call request and the key the Go gate charged it
// under.
type keyVector struct {
	Name    string `json:"name"`
	Service string `json:"service"`
	Tool    string `json:"tool"`
	// Arguments is the request's "arguments" exactly as sent on the wire
	// (absent: the request has none).
	Arguments *string `json:"arguments,omitempty"`
	// ClientKey is the request's _meta "io.stipend/idempotency-key".
	ClientKey string `json:"clientKey,omitempty"`
	// SessionID is the Mcp-Session-Id of the streamable HTTP session the
	// request was posted in.
	SessionID string `json:"sessionId"`
	// RequestID is the JSON-RPC id (a number or a string).
	RequestID any `json:"requestId"`
	// RequestState is the request's requestState (the input-required flow).
	RequestState string `json:"requestState,omitempty"`
	// Agrees says whether the TypeScript gate derives the same key. Both
	// hash the arguments' RFC 8785 canonical form, so it does for any
	// spelling of valid I-JSON; it cannot for a duplicate name, which the
	// SDK's JSON.parse forgets.
	Agrees bool   `json:"agrees"`
	Key    string `json:"key"`
}

type keyVectors struct {
	Comment string      `json:"comment"`
	Vectors []keyVector `json:"vectors"`
}

func args(s string) *string { return &s }

// vectorCases are the requests of the vectors file. The arguments are as the
// official TypeScript SDK's Client sends them (JSON.stringify), unless the
// name says otherwise.
func vectorCases() []keyVector {
	const sid = "session-1"
	c := func(name, tool string, a *string, key string, id any, agrees bool) keyVector {
		return keyVector{Name: name, Service: "weather", Tool: tool, Arguments: a, ClientKey: key, SessionID: sid, RequestID: id, Agrees: agrees}
	}
	vs := []keyVector{
		c("client key", "forecast", args(`{"city":"Oslo"}`), "call-1", 1, true),
		c("client key, other request id", "forecast", args(`{"city":"Oslo"}`), "call-1", 99, true),
		c("client key, non-ASCII", "forecast", args(`{"city":"Oslo"}`), "clé-🔑", 2, true),
		c("client key, other tool", "history", args(`{"city":"Oslo"}`), "call-1", 3, true),
		c("client key, empty arguments", "forecast", args(`{}`), "call-1", 4, true),
		c("client key, no arguments", "forecast", nil, "call-1", 5, true),
		c("session and numeric request id", "forecast", args(`{"city":"Oslo"}`), "", 7, true),
		c("session and string request id", "forecast", args(`{"city":"Oslo"}`), "", "req-7", true),
		c("session, request id 0", "forecast", args(`{"city":"Oslo"}`), "", 0, true),
		c("HTML characters (Go escapes them)", "echo", args(`{"text":"<b>Tom & Jerry</b>"}`), "k", 10, true),
		c("line and paragraph separators (Go escapes them)", "echo", args("{\"text\":\"a\u2028b\u2029c\"}"), "k", 11, true),
		c("non-ASCII text", "echo", args(`{"text":"héllo wörld 日本 🌍"}`), "k", 12, true),
		c("escapes JSON.stringify writes", "echo", args(`{"text":"q\" b\\ n\n t\t c\u0001 d`+"\x7f"+`"}`), "k", 13, true),
		c("lone surrogate", "echo", args(`{"text":"\ud800"}`), "k", 14, true),
		c("numbers", "calc", args(`{"n":1,"f":1.5,"neg":-3,"big":12345678901234,"exp":1e+21,"small":1e-7,"frac":0.1,"zero":0}`), "k", 15, true),
		c("nesting, booleans and null", "calc", args(`{"list":[1,"two",{"three":3},[]],"obj":{"b":true,"a":null,"c":false}}`), "k", 16, true),
		c("names in any order (both sort them)", "calc", args(`{"zeta":1,"alpha":2,"mid":{"z":1,"a":2}}`), "k", 17, true),
		c("the same names in another order: the same key", "calc", args(`{"mid":{"a":2,"z":1},"alpha":2,"zeta":1}`), "k", 170, true),
		c("integer-like names", "calc", args(`{"9":3,"10":2,"b":1}`), "k", 18, true),
		c("whitespace (both compact it)", "forecast", args(`{ "city" : "Oslo" }`), "call-1", 19, true),
		c("Go client: HTML characters escaped by json.Marshal", "echo", args(`{"text":"\u003cb\u003eTom \u0026 Jerry\u003c/b\u003e"}`), "k", 20, true),
		c("another spelling: an unneeded escape", "echo", args(`{"text":"\u00e9"}`), "k", 30, true),
		c("another spelling: 1.0", "calc", args(`{"f":1.0}`), "k", 31, true),
		c("another spelling: an exponent", "calc", args(`{"f":25E-1,"g":100e0}`), "k", 34, true),
		c("an integer beyond 2^53 (both round it to a double)", "calc", args(`{"big":12345678901234567890}`), "k", 35, true),
		c("integer-like names out of order", "calc", args(`{"10":2,"9":3}`), "k", 33, true),
		c("not I-JSON: a duplicate name", "calc", args(`{"a":1,"a":2}`), "k", 32, false),
	}
	other := c("client key, other service", "forecast", args(`{"city":"Oslo"}`), "call-1", 6, true)
	other.Service = "maps"
	state := c("client key and requestState", "forecast", args(`{"city":"Oslo"}`), "call-1", 8, true)
	state.RequestState = "state-abc"
	return append(vs, other, state)
}

// TestIdempotencyKeyVectors checks that testdata/idempotency-keys.json holds
// the keys the Go gate (mcpgate behind mcpgate.Handler, as docs/mcp.md wires
// it) derives today; go test -run TestIdempotencyKeyVectors -update rewrites
// it. The TypeScript tests derive the same keys from the same requests.
func TestIdempotencyKeyVectors(t *testing.T) {
	cases := vectorCases()
	for i := range cases {
		cases[i].Key = goGateKey(t, cases[i])
	}
	got := keyVectors{
		Comment: "Keys the Go gate (mcpgate) charges tools/call requests under; written by `go test ./typescript -run TestIdempotencyKeyVectors -update`, read by test/key.test.ts.",
		Vectors: cases,
	}
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(vectorsFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	b, err := os.ReadFile(vectorsFile)
	if err != nil {
		t.Fatal(err)
	}
	var want keyVectors
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatalf("%s: %v", vectorsFile, err)
	}
	if diff := cmp.Diff(want, roundTrip(t, got)); diff != "" {
		t.Errorf("%s is not what the Go gate derives (-file +gate); rerun with -update:\n%s", vectorsFile, diff)
	}
}

// roundTrip gives v the types a decoded file has (request ids as float64).
func roundTrip(t *testing.T, v keyVectors) keyVectors {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out keyVectors
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// recorder is a Stipend stand-in that records the idempotency key of each
// consume (the vectors' tools are charged before they run, so the gate
// calls nothing else of the Biller).
type recorder struct {
	mcpgate.Biller
	mu   sync.Mutex
	keys []string
}

func (r *recorder) Consume(_ context.Context, req client.ConsumeRequest) (*client.ConsumeResult, error) {
	r.mu.Lock()
	r.keys = append(r.keys, req.IdempotencyKey)
	r.mu.Unlock()
	return &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c1", EntitlementID: "e1", Cost: money.Money{Cents: 1, Currency: "USD"}, Units: 1,
	}}, nil
}

// goGateKey posts v's request, byte for byte, to a Go MCP server gated by
// mcpgate over streamable HTTP, and returns the key the gate charged it under.
func goGateKey(t *testing.T, v keyVector) string {
	t.Helper()
	rec := &recorder{}
	gate, err := mcpgate.New(mcpgate.Config{
		Stipend: rec, Service: v.Service,
		Prices:  map[string]mcpgate.Price{v.Tool: mcpgate.Credits(1, "USD").ChargedBefore()},
		AgentID: func(context.Context, *mcp.CallToolRequest) (string, error) { return "agent", nil },
		Logger:  slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "vectors", Version: "1"}, &mcp.ServerOptions{
		GetSessionID: func() string { return v.SessionID },
	})
	server.AddTool(&mcp.Tool{Name: v.Tool, InputSchema: json.RawMessage(`{"type":"object"}`)},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		})
	server.AddReceivingMiddleware(gate.Middleware)
	ts := httptest.NewServer(mcpgate.Handler(mcp.NewStreamableHTTPHandler(
		func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{JSONResponse: true})))
	defer ts.Close()

	post(t, ts.URL, "", `{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"vectors","version":"1"}}}`)
	post(t, ts.URL, v.SessionID, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	id, err := json.Marshal(v.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	name, _ := json.Marshal(v.Tool)
	params := `{"name":` + string(name)
	if v.Arguments != nil {
		params += `,"arguments":` + *v.Arguments
	}
	if v.RequestState != "" {
		state, _ := json.Marshal(v.RequestState)
		params += `,"requestState":` + string(state)
	}
	if v.ClientKey != "" {
		key, _ := json.Marshal(v.ClientKey)
		params += `,"_meta":{"` + mcpgate.MetaIdempotencyKey + `":` + string(key) + `}`
	}
	post(t, ts.URL, v.SessionID, `{"jsonrpc":"2.0","id":`+string(id)+`,"method":"tools/call","params":`+params+`}}`)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.keys) != 1 {
		t.Fatalf("%s: the gate charged %d times, want once", v.Name, len(rec.keys))
	}
	return rec.keys[0]
}

func post(t *testing.T, url, session, body string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		t.Fatalf("POST %s: %d %s", body, res.StatusCode, out)
	}
	if strings.Contains(string(out), `"error"`) {
		t.Fatalf("POST %s: %s", body, fmt.Sprint(string(out)))
	}
}
