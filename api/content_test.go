package api_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/problem"
)

// TestInput_EveryBodyOneRule: every route that takes a body, the action
// routes whose body is optional (revoke, succeed, fail, refund, disable,
// retry, delete…) included, reads it by one rule: at most the body limit,
// application/json in UTF-8, no content coding, one JSON object. A body the
// server would misread is a 415 naming the header, never parsed as if it
// were plain UTF-8 JSON, nor ignored.
func TestInput_EveryBodyOneRule(t *testing.T) {
	e := newEnv(t)
	big := `{"a":"` + strings.Repeat("a", api.DefaultBodyLimit) + `"}`
	tests := []struct {
		name        string
		body        string
		contentType string
		encoding    string
		status      int
		field       string
	}{
		{"TooLarge", big, "application/json", "", http.StatusRequestEntityTooLarge, ""},
		{"Binary", "\x00\x01\xff\xfe", "application/octet-stream", "", http.StatusUnsupportedMediaType, "Content-Type"},
		{"NoContentType", "{}", "", "", http.StatusUnsupportedMediaType, "Content-Type"},
		{"UTF16", "\xff\xfe{\x00}\x00", "application/json; charset=UTF-16", "", http.StatusUnsupportedMediaType, "Content-Type"},
		{"Latin1", "{}", "application/json; charset=latin1", "", http.StatusUnsupportedMediaType, "Content-Type"},
		{"JSONPatch", "[]", "application/json-patch+json", "", http.StatusUnsupportedMediaType, "Content-Type"},
		{"Gzip", "{}", "application/json", "gzip", http.StatusUnsupportedMediaType, "Content-Encoding"},
		{"Deflate", "{}", "application/json", "deflate", http.StatusUnsupportedMediaType, "Content-Encoding"},
		{"Array", "[]", "application/json", "", http.StatusBadRequest, ""},
		{"Null", "null", "application/json", "", http.StatusBadRequest, ""},
	}
	param := regexp.MustCompile(`:[A-Za-z]+`)
	routes := 0
	for _, r := range e.srv.Echo().Routes() {
		if r.Method == http.MethodGet || r.Method == "echo_route_not_found" || r.Path == "/v1/webhooks/stripe" {
			continue // GET bodies mean nothing; Stripe's is its signed payload (webhooks_test.go)
		}
		routes++
		path := param.ReplaceAllString(r.Path, "x")
		for _, tt := range tests {
			t.Run(r.Method+" "+r.Path+"/"+tt.name, func(t *testing.T) {
				h := map[string]string{"Content-Type": tt.contentType, "Idempotency-Key": uuid.NewString()}
				if tt.encoding != "" {
					h["Content-Encoding"] = tt.encoding
				}
				res := e.do(req{Method: r.Method, Path: path, Key: e.keys.Admin, Body: tt.body, Header: h})
				if res.Status != tt.status {
					t.Fatalf("status %d, want %d; body %s", res.Status, tt.status, res.Body)
				}
				p := res.problem(t)
				if tt.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tt.field) {
					t.Errorf("problem %+v, want one naming %s", p, tt.field)
				}
				if tt.status == http.StatusUnsupportedMediaType && p.Type != problem.UnsupportedMediaType.URI() {
					t.Errorf("problem type %s, want %s", p.Type, problem.UnsupportedMediaType.URI())
				}
				if tt.encoding != "" && res.Header.Get("Accept-Encoding") != "identity" {
					t.Errorf("Accept-Encoding %q, want identity (RFC 7694)", res.Header.Get("Accept-Encoding"))
				}
			})
		}
		for _, ct := range []string{"application/json; charset=utf-8", "application/json;charset=UTF-8", "application/json; charset=\"utf-8\""} {
			res := e.do(req{Method: r.Method, Path: path, Key: e.keys.Admin, Body: "{}",
				Header: map[string]string{"Content-Type": ct, "Idempotency-Key": uuid.NewString(), "Content-Encoding": "identity"}})
			if res.Status == http.StatusUnsupportedMediaType {
				t.Errorf("%s %s with Content-Type %q: 415, want it accepted; body %s", r.Method, path, ct, res.Body)
			}
		}
	}
	if routes < 15 {
		t.Errorf("checked %d routes with bodies, want every non-GET route (more than 15)", routes)
	}
}
