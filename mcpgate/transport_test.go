package mcpgate_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/stipend-mcp/stipend/mcpgate"
)

const (
	initializeParams = `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}`
	forecastParams   = `{"name":"forecast","arguments":{"city":"Oslo"},"_meta":{"io.stipend/agent-id":"agent-1"}}`
)

// rawSession is a JSON-RPC connection to a server, driven by hand so a test
// can send the same request id twice, as a transport-level retry does.
type rawSession struct {
	t    *testing.T
	conn mcp.Connection
}

func dialRaw(t *testing.T, s *mcp.Server) *rawSession {
	t.Helper()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := s.Connect(t.Context(), mcpgate.Transport(st), nil)
	if err != nil {
		t.Fatalf("server Connect: %v", err)
	}
	conn, err := ct.Connect(t.Context())
	if err != nil {
		t.Fatalf("client transport Connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(); ss.Close() })
	r := &rawSession{t: t, conn: conn}
	r.call(1, "initialize", initializeParams)
	if err := conn.Write(t.Context(), &jsonrpc.Request{Method: "notifications/initialized", Params: json.RawMessage(`{}`)}); err != nil {
		t.Fatalf("writing initialized: %v", err)
	}
	return r
}

// call sends a request and waits for its response.
func (r *rawSession) call(id int64, method, params string) *jsonrpc.Response {
	r.t.Helper()
	jid, err := jsonrpc.MakeID(float64(id))
	if err != nil {
		r.t.Fatalf("MakeID(%d): %v", id, err)
	}
	if err = r.conn.Write(r.t.Context(), &jsonrpc.Request{ID: jid, Method: method, Params: json.RawMessage(params)}); err != nil {
		r.t.Fatalf("writing %s: %v", method, err)
	}
	for {
		m, err := r.conn.Read(r.t.Context())
		if err != nil {
			r.t.Fatalf("reading the answer to %s: %v", method, err)
		}
		if resp, ok := m.(*jsonrpc.Response); ok && resp.ID == jid {
			if resp.Error != nil {
				r.t.Fatalf("%s: %v", method, resp.Error)
			}
			return resp
		}
	}
}

func TestTransport_RetriedRequestKeepsItsKey(t *testing.T) {
	_, f, _ := funded(t)
	var ran atomic.Int32
	s := toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false)

	one := dialRaw(t, s)
	one.call(7, "tools/call", forecastParams)
	one.call(7, "tools/call", forecastParams) // the same request delivered again
	one.call(8, "tools/call", forecastParams)
	other := dialRaw(t, s)
	other.call(7, "tools/call", forecastParams) // another connection reusing id 7

	keys := f.keys(t, 4)
	if keys[0] != keys[1] {
		t.Errorf("request 7 sent twice got keys %s and %s, want the same", keys[0], keys[1])
	}
	if keys[2] == keys[0] {
		t.Errorf("request 8 got request 7's key %s, want its own", keys[2])
	}
	if keys[3] == keys[0] {
		t.Errorf("request 7 on another connection got the first connection's key, want its own")
	}
}

func TestHandler_RetriedPostKeepsItsKey(t *testing.T) {
	_, f, _ := funded(t)
	var ran atomic.Int32
	s := toolServer(newGate(t, mcpgate.Config{Stipend: f}), &ran, false)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{JSONResponse: true})
	srv := httptest.NewServer(mcpgate.Handler(h))
	t.Cleanup(srv.Close)

	var session string
	post := func(body string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, bytes.NewBufferString(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", body, err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("POST %s: %d %s", body, resp.StatusCode, out)
		}
		if id := resp.Header.Get("Mcp-Session-Id"); id != "" {
			session = id
		}
	}
	post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":` + initializeParams + `}`)
	post(`{"jsonrpc":"2.0","method":"notifications/initialized","params":{}}`)
	call := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":` + forecastParams + `}`
	post(call)
	post(call)
	post(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":` + forecastParams + `}`)

	keys := f.keys(t, 3)
	if keys[0] != keys[1] {
		t.Errorf("request 5 posted twice got keys %s and %s, want the same", keys[0], keys[1])
	}
	if keys[2] == keys[0] {
		t.Errorf("request 6 got request 5's key, want its own")
	}
	if got := ran.Load(); got != 3 {
		t.Errorf("tool ran %d times, want 3 (a replayed charge still runs the tool)", got)
	}
}

func TestHandler_Stamping(t *testing.T) {
	var got []byte
	sink := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		if r.ContentLength != int64(len(got)) {
			t.Errorf("ContentLength = %d, body has %d bytes", r.ContentLength, len(got))
		}
	})
	h := mcpgate.Handler(sink)
	post := func(body string) []byte {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewBufferString(body))
		r.Header.Set("Mcp-Session-Id", "sess")
		h.ServeHTTP(httptest.NewRecorder(), r)
		return got
	}
	requestID := func(msg json.RawMessage) any {
		var m struct {
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if err := json.Unmarshal(msg, &m); err != nil {
			t.Fatalf("decoding %s: %v", msg, err)
		}
		return m.Params.Meta[mcpgate.MetaRequestID]
	}

	t.Run("OtherMethodsPassUnchanged", func(t *testing.T) {
		for _, body := range []string{
			`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
			`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
			`not json`,
		} {
			if out := post(body); string(out) != body {
				t.Errorf("posted %s, the server got %s; want it unchanged", body, out)
			}
		}
	})
	t.Run("ClientValueIsReplaced", func(t *testing.T) {
		out := post(`{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"t","_meta":{"io.stipend/request-id":"forged","x":1}}}`)
		if got, want := requestID(out), "http:sess/s:a"; got != want {
			t.Errorf("request id = %v, want %q", got, want)
		}
		var m struct {
			Params struct {
				Meta map[string]any `json:"_meta"`
			} `json:"params"`
		}
		json.Unmarshal(out, &m)
		if m.Params.Meta["x"] != float64(1) {
			t.Errorf("other _meta members lost: %v", m.Params.Meta)
		}
	})
	t.Run("Batch", func(t *testing.T) {
		out := post(`[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"t"}},{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
		var batch []json.RawMessage
		if err := json.Unmarshal(out, &batch); err != nil || len(batch) != 2 {
			t.Fatalf("batch became %s", out)
		}
		if got, want := requestID(batch[0]), "http:sess/n:3"; got != want {
			t.Errorf("request id in the batch = %v, want %q", got, want)
		}
		if got := requestID(batch[1]); got != nil {
			t.Errorf("the notification got a request id %v", got)
		}
	})
}
