package api_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/problem"
)

// rawExchange sends raw, a whole HTTP/1.1 request as bytes, to the server
// at addr and reads the answer.
func rawExchange(t *testing.T, addr, raw string) response {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %q: %v", raw[:min(len(raw), 80)], err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, Header: res.Header, Body: body}
}

// TestMalformedRequests sends malformed requests over a real connection.
// Those that reach Stipend's handler (a bad escape in the query, a path
// parameter that unescapes to a control character, an unknown route) are
// answered with a problem document carrying the request ID; those that
// net/http refuses before any handler runs (a bad escape in the path, two
// Content-Lengths, a malformed request line) get a problem document too,
// from problem.Listener, with no request ID, as docs/api.md says.
func TestMalformedRequests(t *testing.T) {
	e := newEnv(t)
	ts := httptest.NewUnstartedServer(e.srv.Handler())
	ts.Listener = problem.Listener(ts.Listener) // as stipend serve listens
	ts.Start()
	t.Cleanup(ts.Close)
	addr := strings.TrimPrefix(ts.URL, "http://")
	get := func(target string) string {
		return fmt.Sprintf("GET %s HTTP/1.1\r\nHost: stipend\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", target, e.keys.Admin)
	}
	entitlements := "/v1/accounts/" + agentA + "/entitlements"
	tests := []struct {
		name, raw string
		status    int
		field     string // the field a Stipend problem names ("" for none)
		byGo      bool
	}{
		{"QueryBadEscape", get(entitlements + "?limit=%ZZ"), 400, "limit", false},
		{"QueryBadEscapeInName", get(entitlements + "?li%ZZmit=5"), 400, "li%ZZmit", false},
		{"QuerySemicolon", get(entitlements + "?limit=5;cursor=x"), 400, "limit", false},
		{"QueryTwice", get(entitlements + "?limit=5&limit=500"), 400, "limit", false},
		{"QueryOnAPublicRoute", get("/healthz?x=%ZZ"), 400, "x", false},
		{"PathParamControl", get("/v1/accounts/%00"), 400, "agentId", false},
		{"PathParamNotASCII", get("/v1/accounts/%FF"), 400, "agentId", false},
		{"UnknownRoute", get("/v1/nothing-here"), 404, "", false},
		{"PathBadEscape", get("/v1/accounts/%ZZ"), 400, "", true},
		{"TwoContentLengths", "POST /v1/consume HTTP/1.1\r\nHost: stipend\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, "", true},
		{"MalformedRequestLine", "G(T /healthz HTTP/1.1\r\nHost: stipend\r\n\r\n", 400, "", true},
		{"NoHost", "GET /healthz HTTP/1.1\r\n\r\n", 400, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := rawExchange(t, addr, tt.raw)
			if res.Status != tt.status {
				t.Fatalf("status %d, want %d; body %s", res.Status, tt.status, res.Body)
			}
			if tt.byGo {
				// net/http refuses it before any handler; problem.Listener
				// rewrites its answer (issue 29, item 5).
				if p := res.problem(t); p.Status != tt.status || p.Type != problem.InvalidRequest.URI() {
					t.Errorf("problem %+v, want invalid-request with status %d", p, tt.status)
				}
				return
			}
			p := res.problem(t)
			checkRequestID(t, res)
			if tt.field != "" && (len(p.Errors) != 1 || p.Errors[0].Field != tt.field || p.Type != problem.InvalidRequest.URI()) {
				t.Errorf("problem %+v, want invalid-request naming %q", p, tt.field)
			}
		})
	}
}
