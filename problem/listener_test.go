package problem_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/stipend-mcp/stipend/problem"
)

// TestListener: requests net/http refuses before any handler (issue 29,
// item 5: /v1/accounts/%ZZ answered text/plain) are answered as problem
// documents with net/http's status; a handler's own answers pass through
// unchanged, a text/plain one included.
func TestListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, "a handler's own 400")
	}), MaxHeaderBytes: 1 << 10}
	go srv.Serve(problem.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	for _, tc := range []struct {
		name, raw   string
		status      int
		wantProblem bool
	}{
		{"PathBadEscape", "GET /v1/accounts/%ZZ HTTP/1.1\r\nHost: s\r\n\r\n", 400, true},
		{"MalformedRequestLine", "G(T / HTTP/1.1\r\nHost: s\r\n\r\n", 400, true},
		{"TwoContentLengths", "POST / HTTP/1.1\r\nHost: s\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", 400, true},
		{"NoHost", "GET / HTTP/1.1\r\n\r\n", 400, true},
		{"HeadersTooLarge", "GET / HTTP/1.1\r\nHost: s\r\nX-Big: " + strings.Repeat("a", 8<<10) + "\r\n\r\n", 431, true},
		{"HandlersOwn", "GET / HTTP/1.1\r\nHost: s\r\n\r\n", 400, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", ln.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.Write([]byte(tc.raw)); err != nil {
				t.Fatal(err)
			}
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("reading the answer: %v", err)
			}
			defer res.Body.Close()
			if res.StatusCode != tc.status {
				t.Errorf("status %d, want %d", res.StatusCode, tc.status)
			}
			ct := res.Header.Get("Content-Type")
			if !tc.wantProblem {
				if ct != "text/plain; charset=utf-8" {
					t.Errorf("a handler's answer: Content-Type %q, want it unchanged", ct)
				}
				return
			}
			var p problem.Problem
			if ct != "application/problem+json" || json.NewDecoder(res.Body).Decode(&p) != nil || p.Status != tc.status || p.Type == "" {
				t.Errorf("Content-Type %q, problem %+v; want a problem document with status %d", ct, p, tc.status)
			}
		})
	}
}
