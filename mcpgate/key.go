package mcpgate

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// idempotencyKey derives the key Stipend charges call under. Its material is
// the client's key, or else the session and the stamped JSON-RPC request id,
// or else (nothing to recognise a retry by) random bytes. The service, tool
// and compacted arguments are hashed in too, and the requestState of a
// request that continues a call after an input-required result, so one key
// never pays for two different calls or for two rounds of one. The result is "mcp-" and 64 hex digits: valid whatever the
// client sent, and it never reveals the client's key.
func (g *Gate) idempotencyKey(call *mcp.CallToolRequest) string {
	h := sha256.New()
	var n [8]byte
	field := func(b []byte) {
		binary.BigEndian.PutUint64(n[:], uint64(len(b)))
		h.Write(n[:])
		h.Write(b)
	}
	meta := call.Params.Meta
	if k, ok := meta[MetaIdempotencyKey].(string); ok && k != "" {
		field([]byte("client"))
		field([]byte(k))
	} else if id, ok := meta[MetaRequestID].(string); ok && id != "" {
		field([]byte("request"))
		var session string
		if call.Session != nil {
			session = call.Session.ID()
		}
		field([]byte(session))
		field([]byte(id))
	} else {
		field([]byte("random"))
		field([]byte(rand.Text()))
	}
	field([]byte(g.service))
	field([]byte(call.Params.Name))
	var args bytes.Buffer
	if json.Compact(&args, call.Params.Arguments) != nil {
		args.Reset()
		args.Write(call.Params.Arguments)
	}
	field(args.Bytes())
	if call.Params.RequestState != "" {
		field([]byte("state"))
		field([]byte(call.Params.RequestState))
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil))
}
