package mcpgate

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Transport wraps a server transport (stdio, in-memory, …) so that every
// tools/call request read from it carries its JSON-RPC request id, with a
// nonce of the connection, in _meta "io.stipend/request-id" (overwriting
// whatever the client put there). The gate derives the idempotency key of a
// call without a client key from it, so the same request delivered twice on
// one connection is charged once.
func Transport(t mcp.Transport) mcp.Transport { return &transport{inner: t} }

type transport struct{ inner mcp.Transport }

func (t *transport) Connect(ctx context.Context) (mcp.Connection, error) {
	c, err := t.inner.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &connection{Connection: c, nonce: rand.Text()}, nil
}

// SupportsProtocolVersion passes the question on to the wrapped transport.
func (t *transport) SupportsProtocolVersion(version string) bool {
	if s, ok := t.inner.(mcp.ProtocolVersionSupporter); ok {
		return s.SupportsProtocolVersion(version)
	}
	return true
}

type connection struct {
	mcp.Connection
	nonce string
}

func (c *connection) Read(ctx context.Context) (jsonrpc.Message, error) {
	m, err := c.Connection.Read(ctx)
	if err == nil {
		stamp(m, c.nonce)
	}
	return m, err
}

// MaxStampedBody is the largest HTTP request body Handler rewrites; larger
// ones pass through unstamped.
const MaxStampedBody = 4 << 20

// Handler wraps a streamable HTTP handler (mcp.NewStreamableHTTPHandler) so
// that tools/call requests posted to it carry their JSON-RPC request id in
// _meta "io.stipend/request-id", with the Mcp-Session-Id header as the nonce.
// A request without a session header (stateless servers) gets a random nonce:
// it cannot be told apart from another client's request with the same id.
func Handler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.Body == nil {
			h.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, MaxStampedBody+1))
		if err != nil {
			http.Error(w, "reading the request body failed", http.StatusBadRequest)
			return
		}
		if len(body) > MaxStampedBody {
			r.Body = readCloser{io.MultiReader(bytes.NewReader(body), r.Body), r.Body}
			h.ServeHTTP(w, r)
			return
		}
		nonce := r.Header.Get("Mcp-Session-Id")
		if nonce == "" {
			nonce = rand.Text()
		}
		body = stampBody(body, "http:"+nonce)
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		h.ServeHTTP(w, r)
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// stampBody stamps the message, or each message of a batch, in body. A body
// it cannot parse is returned as it is, for the server to reject.
func stampBody(body []byte, nonce string) []byte {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var batch []json.RawMessage
		if json.Unmarshal(body, &batch) != nil {
			return body
		}
		for i, raw := range batch {
			batch[i] = stampMessage(raw, nonce)
		}
		out, err := json.Marshal(batch)
		if err != nil {
			return body
		}
		return out
	}
	return stampMessage(body, nonce)
}

// stampMessage stamps one JSON-RPC message if it is a tools/call request.
// It decodes only the members it needs (the SDK's decoder allocates a large
// buffer per message).
func stampMessage(raw []byte, nonce string) []byte {
	if !bytes.Contains(raw, []byte(methodCallTool)) {
		return raw
	}
	var msg map[string]json.RawMessage
	if json.Unmarshal(raw, &msg) != nil {
		return raw
	}
	var method string
	if json.Unmarshal(msg["method"], &method) != nil || method != methodCallTool {
		return raw
	}
	var id any
	if json.Unmarshal(msg["id"], &id) != nil || id == nil {
		return raw
	}
	params, ok := stampParams(msg["params"], nonce+"/"+idString(id))
	if !ok {
		return raw
	}
	msg["params"] = params
	out, err := json.Marshal(msg)
	if err != nil {
		return raw
	}
	return out
}

// stamp sets _meta "io.stipend/request-id" on m if it is a tools/call
// request.
func stamp(m jsonrpc.Message, nonce string) {
	r, ok := m.(*jsonrpc.Request)
	if !ok || r.Method != methodCallTool || !r.ID.IsValid() {
		return
	}
	if params, ok := stampParams(r.Params, nonce+"/"+idString(r.ID.Raw())); ok {
		r.Params = params
	}
}

// idString renders a JSON-RPC id: "s:" and a string id, or "n:" and a
// numeric one.
func idString(id any) string {
	switch v := id.(type) {
	case string:
		return "s:" + v
	case float64:
		return "n:" + strconv.FormatInt(int64(v), 10)
	}
	return fmt.Sprintf("n:%v", id)
}

// stampParams returns params with _meta[MetaRequestID] set to value
// (replacing what the client put there), or false if params is not a JSON
// object, for the server to reject.
func stampParams(params json.RawMessage, value string) (json.RawMessage, bool) {
	var p map[string]json.RawMessage
	if json.Unmarshal(params, &p) != nil || p == nil {
		return nil, false
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := p["_meta"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &meta) != nil || meta == nil {
			return nil, false
		}
	}
	meta[MetaRequestID], _ = json.Marshal(value)
	var err error
	if p["_meta"], err = json.Marshal(meta); err != nil {
		return nil, false
	}
	out, err := json.Marshal(p)
	return out, err == nil
}
