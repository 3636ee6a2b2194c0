package mcpgate

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"

	"github.com/gowebpki/jcs"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// idempotencyKey derives the key Stipend charges call under. Its material is
// the client's key, or else the session and the stamped JSON-RPC request id,
// or else (nothing to recognise a retry by) random bytes. The service, the
// tool, the arguments in RFC 8785 canonical form (canonicalArguments) and
// the requestState of a request that continues a call after an
// input-required result are hashed in too, so one key never pays for two
// different calls or for two rounds of one. The result is "mcp-" and 64 hex
// digits: valid whatever the client sent, and it never reveals the client's
// key.
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
	field(canonicalArguments(call.Params.Arguments))
	if call.Params.RequestState != "" {
		field([]byte("state"))
		field([]byte(call.Params.RequestState))
	}
	return "mcp-" + hex.EncodeToString(h.Sum(nil))
}

// canonicalArguments is a call's arguments in the JSON Canonicalization
// Scheme of RFC 8785 (names sorted, numbers and strings in one spelling,
// no whitespace), so that a client re-serialising its arguments differently
// on a retry, and the TypeScript gate (which hashes the same form of what
// JSON.parse gave it), derive the same key. It is the canonical form
// receipts and request fingerprints use (receipt, idempotency). Arguments
// with no canonical form are hashed as sent; no arguments hash as empty.
func canonicalArguments(raw []byte) []byte {
	if len(raw) == 0 {
		return nil
	}
	c, err := jcs.Transform(raw)
	if err != nil {
		return raw
	}
	return c
}
