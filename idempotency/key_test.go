package idempotency_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/stipend-mcp/stipend/idempotency"
)

func TestHashKey(t *testing.T) {
	base := idempotency.HashKey("ns", "POST /r", "key")
	if !idempotency.ValidID(base) {
		t.Fatalf("HashKey = %q, want 64 lower-case hex digits", base)
	}
	if strings.Contains(base, "key") {
		t.Errorf("HashKey = %q contains the raw key", base)
	}
	for name, other := range map[string]string{
		"other namespace":        idempotency.HashKey("ns2", "POST /r", "key"),
		"other route":            idempotency.HashKey("ns", "POST /s", "key"),
		"other key":              idempotency.HashKey("ns", "POST /r", "key2"),
		"shifted field boundary": idempotency.HashKey("ns", "POST /rk", "ey"),
	} {
		if other == base {
			t.Errorf("HashKey with %s = %q, the same as the base", name, other)
		}
	}
	if again := idempotency.HashKey("ns", "POST /r", "key"); again != base {
		t.Errorf("HashKey is not deterministic: %q, then %q", base, again)
	}
}

func TestFingerprint(t *testing.T) {
	fp := func(method, uri, body, principal string) string {
		return idempotency.Fingerprint(method, uri, []byte(body), principal)
	}
	base := fp("POST", "/v1/x", `{"a":1,"b":[1,2]}`, "alice")
	if got := fp("post", "/v1/x", "{ \"b\": [1, 2],\n \"a\": 1 }", "alice"); got != base {
		t.Errorf("Fingerprint of the same JSON reordered and respaced differs")
	}
	for name, other := range map[string]string{
		"method":    fp("PUT", "/v1/x", `{"a":1,"b":[1,2]}`, "alice"),
		"path":      fp("POST", "/v1/y", `{"a":1,"b":[1,2]}`, "alice"),
		"body":      fp("POST", "/v1/x", `{"a":2,"b":[1,2]}`, "alice"),
		"principal": fp("POST", "/v1/x", `{"a":1,"b":[1,2]}`, "bob"),
		"anonymous": fp("POST", "/v1/x", `{"a":1,"b":[1,2]}`, ""),
	} {
		if other == base {
			t.Errorf("Fingerprint with another %s equals the base", name)
		}
	}
	if a, b := fp("POST", "/v1/x", "not json", ""), fp("POST", "/v1/x", "not  json", ""); a == b {
		t.Errorf("non-JSON bodies differing in one byte have one fingerprint")
	}
}

func TestCollectionName(t *testing.T) {
	got := idempotency.CollectionName("prod-eu")
	if !regexp.MustCompile(`^idem_[0-9a-f]{32}$`).MatchString(got) {
		t.Errorf("CollectionName = %q, want idem_ and 32 hex digits", got)
	}
	if got == idempotency.CollectionName("prod-us") {
		t.Errorf("two namespaces share collection %q", got)
	}
}

func TestParseReference(t *testing.T) {
	id := idempotency.HashKey("ns", "r", "k")
	backend, collection, gotID, err := idempotency.ParseReference("firestore/idem_ab/" + id)
	if err != nil || backend != "firestore" || collection != "idem_ab" || gotID != id {
		t.Errorf("ParseReference = %q, %q, %q, %v; want firestore, idem_ab, %q", backend, collection, gotID, err, id)
	}
	for _, bad := range []string{"", id, "firestore/idem_ab/raw-key", "firestore//" + id, "a/b/c/" + id, "firestore/idem_ab/" + strings.ToUpper(id)} {
		if _, _, _, err := idempotency.ParseReference(bad); err == nil {
			t.Errorf("ParseReference(%q): no error, want one", bad)
		}
	}
}

// FuzzFingerprint checks that a JSON body and its RFC 8785 canonical form
// have one fingerprint, and that HashKey never yields an invalid ID.
func FuzzFingerprint(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null]}`, `{ "x" : "\u00e9" }`, `not json`, ``, `1e3`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		if !idempotency.ValidID(idempotency.HashKey("ns", "r", body)) {
			t.Fatalf("HashKey(%q) is not a valid id", body)
		}
		canonical, err := jcs.Transform([]byte(body))
		if err != nil {
			return
		}
		a := idempotency.Fingerprint("POST", "/x", []byte(body), "p")
		b := idempotency.Fingerprint("POST", "/x", canonical, "p")
		if a != b {
			t.Errorf("Fingerprint(%q) != Fingerprint of its canonical form %q", body, canonical)
		}
	})
}
