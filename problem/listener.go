package problem

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
)

// Some requests net/http refuses itself, before any handler runs: a bad
// escape in the path (/v1/accounts/%ZZ), a malformed request line, two
// Content-Lengths, no Host, headers over the server's limit. It answers
// them with a canned text/plain response written straight to the
// connection, and offers no hook to change it. Listener wraps a listener so
// that those canned answers go out as problem documents, like every other
// error of the API: the response is recognised by the exact shape net/http
// gives it (its status line, then Content-Type text/plain before
// Connection: close and no other header — a handler's response never has
// that order, since net/http writes header names sorted), and replaced
// whole, with the same status.

// cannedHeaders is what follows net/http's status line in its canned
// answers.
var cannedHeaders = []byte("\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n")

// Listener returns ln with net/http's canned error answers written as
// problem documents.
func Listener(ln net.Listener) net.Listener { return listener{ln} }

type listener struct{ net.Listener }

func (l listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return conn{c}, nil
}

type conn struct{ net.Conn }

func (c conn) Write(p []byte) (int, error) {
	status, detail, ok := canned(p)
	if !ok {
		return c.Conn.Write(p)
	}
	kind := InvalidRequest
	switch {
	case status == http.StatusRequestHeaderFieldsTooLarge:
		kind, detail = BodyTooLarge, "the request's headers are too large"
	case status >= 500:
		kind = Internal
	}
	body, err := json.Marshal(Problem{Type: kind.URI(), Title: kind.Title(), Status: status, Detail: detail})
	if err != nil {
		return c.Conn.Write(p)
	}
	resp := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s",
		status, http.StatusText(status), len(body), body)
	if _, err := c.Conn.Write([]byte(resp)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// canned reports whether p is one of net/http's canned error answers, with
// its status and what its body says of the request.
func canned(p []byte) (status int, detail string, ok bool) {
	const line = "HTTP/1.1 "
	if !bytes.HasPrefix(p, []byte(line)) || len(p) < len(line)+3 {
		return 0, "", false
	}
	i := bytes.Index(p, cannedHeaders)
	if i < 0 || bytes.Contains(p[:i], []byte("\r\n")) { // only the status line before them
		return 0, "", false
	}
	status, err := strconv.Atoi(string(p[len(line) : len(line)+3]))
	if err != nil || status < 400 {
		return 0, "", false
	}
	detail = "net/http refused the request before it reached Stipend: " + string(p[i+len(cannedHeaders):])
	return status, detail, true
}
