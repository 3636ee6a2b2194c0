package api

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The bodies clients send take the fast path: compact, and as Python's
// json.dumps writes them (a space after each separator).
func TestConsumeFastPath_CommonBodies(t *testing.T) {
	for _, body := range []string{
		`{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k-1","cost":{"cents":1,"currency":"USD"}}`,
		`{"agentId": "agent-a", "service": "search", "tool": "web", "idempotencyKey": "k-1", "units": 3, "entitlementId": "ent_1"}`,
		"{\n  \"cost\": {\"currency\": \"EUR\", \"cents\": 0},\n  \"agentId\": \"a b\", \"service\": \"s\", \"tool\": \"t\", \"idempotencyKey\": \"k\"\n}\n",
	} {
		var b consumeBody
		if !b.decodeFast([]byte(body)) || !b.tagsHold() {
			t.Errorf("%s: not on the fast path (%+v)", body, b)
		}
	}
}

// FuzzConsumeFastPath: what the fast path decodes, DecodeJSON decodes to
// the same body; when it declines, the body is untouched; and tagsHold is
// exactly what the validator tags say. The seed corpus runs in every
// normal test run.
func FuzzConsumeFastPath(f *testing.F) {
	for _, s := range []string{
		`{"agentId":"a","service":"s","tool":"t","idempotencyKey":"k","cost":{"cents":1,"currency":"USD"},"units":2}`,
		`{"agentId":"a","service":"s","tool":"t","idempotencyKey":"k","entitlementId":"e"}`,
		` { "agentId" : "a" , "cost" : { "currency" : "USD" , "cents" : 0 } } `,
		`{"agentId":"a","agentId":"b"}`,
		`{"cost":{"cents":1,"cents":2,"currency":"USD"}}`,
		`{"cost":{"cents":1,"currency":"usd"}}`,
		`{"cost":{"cents":1}}`,
		`{"cost":{"cents":-1,"currency":"USD"}}`,
		`{"cost":{"cents":1.0,"currency":"USD"}}`,
		`{"cost":null}`, `{"units":null}`, `{"agentId":null}`,
		`{"units":0}`, `{"units":1000001}`, `{"units":01}`, `{"units":1e3}`, `{"units":9007199254740991}`,
		`{"units":999999999999999}`, `{"units":1000000000000000}`,
		`{"agentId":"a\u0062"}`, `{"agent\u0049d":"a"}`, `{"AgentId":"a"}`, `{"agentId":"\u0000"}`,
		`{"agentId":"é"}`, "{\"agentId\":\"a\x7f\"}", `{"x":1}`, `{}`, `{,}`, `{"agentId":"a",}`,
		`{"agentId":"a"} x`, `{"agentId":"a"}}`, `[]`, `null`, ``, `{"agentId":"a"`,
		`{"tool":"` + string(make([]byte, 0)) + `"}`,
	} {
		f.Add([]byte(s))
	}
	v := newValidator()
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast consumeBody
		if !fast.decodeFast(data) {
			if diff := cmp.Diff(consumeBody{}, fast); diff != "" {
				t.Fatalf("%q: declined, yet changed the body:\n%s", data, diff)
			}
			return
		}
		var slow consumeBody
		if err := DecodeJSON(data, &slow); err != nil {
			t.Fatalf("%q: the fast path decoded it, DecodeJSON refuses it: %v", data, err)
		}
		if diff := cmp.Diff(slow, fast); diff != "" {
			t.Fatalf("%q: the fast path differs from DecodeJSON (-DecodeJSON +fast):\n%s", data, diff)
		}
		if tags := v.Struct(&fast) == nil; fast.tagsHold() != tags {
			t.Fatalf("%q: tagsHold() = %v, the validator tags say %v", data, !tags, tags)
		}
	})
}

// BenchmarkConsumeBody measures reading the common consume body: the
// general path (DecodeJSON, then the validator tags) against the fast one
// (decodeFast, then tagsHold), in the same run.
func BenchmarkConsumeBody(b *testing.B) {
	body := []byte(`{"agentId":"agent-a","service":"search","tool":"web","idempotencyKey":"k-12345","cost":{"cents":1,"currency":"USD"}}`)
	s := &Server{validate: newValidator()}
	b.Run("general", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var cb consumeBody
			if err := DecodeJSON(body, &cb); err != nil {
				b.Fatal(err)
			}
			if err := s.check(&cb); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var cb consumeBody
			if !cb.decodeFast(body) || !cb.tagsHold() {
				b.Fatal("not on the fast path")
			}
		}
	})
}
