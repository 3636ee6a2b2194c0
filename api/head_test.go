package api_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestHead_ServedByTheGetRoute checks that HEAD answers as GET does, with
// the same status and headers and no body: for an operations route, a
// read route with its authorization, and an unknown path.
func TestHead_ServedByTheGetRoute(t *testing.T) {
	e := newEnv(t)
	id := e.grantCredits("agent-head", 500)
	ts := httptest.NewServer(e.srv.Handler())
	defer ts.Close()
	cases := []struct {
		name, path, key string
		want            int
	}{
		{"health", "/healthz", "", http.StatusOK},
		{"entitlement", "/v1/entitlements/" + id, e.keys.Admin, http.StatusOK},
		{"entitlement without a key", "/v1/entitlements/" + id, "", http.StatusUnauthorized},
		{"unknown path", "/v1/nothing-here", e.keys.Admin, http.StatusNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			do := func(method string) (*http.Response, []byte) {
				req, err := http.NewRequestWithContext(t.Context(), method, ts.URL+tc.path, nil)
				if err != nil {
					t.Fatal(err)
				}
				if tc.key != "" {
					req.Header.Set("Authorization", "Bearer "+tc.key)
				}
				res, err := ts.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				if err != nil {
					t.Fatal(err)
				}
				return res, b
			}
			get, getBody := do(http.MethodGet)
			head, headBody := do(http.MethodHead)
			if get.StatusCode != tc.want || head.StatusCode != tc.want {
				t.Fatalf("GET %s = %d, HEAD = %d; want %d for both", tc.path, get.StatusCode, head.StatusCode, tc.want)
			}
			if len(getBody) == 0 || len(headBody) != 0 {
				t.Errorf("GET body %d bytes, HEAD body %d bytes; want a body for GET only", len(getBody), len(headBody))
			}
			if g, h := get.Header.Get("Content-Type"), head.Header.Get("Content-Type"); g != h {
				t.Errorf("Content-Type: GET %q, HEAD %q; want the same", g, h)
			}
		})
	}
}
