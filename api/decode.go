package api

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/problem"
)

// body is a pooled buffer for request bodies, with the reader that limits them.
type body struct {
	buf bytes.Buffer
	lr  io.LimitedReader
}

var bodies = sync.Pool{New: func() any { return new(body) }}

// decode reads the request body into dst strictly: at most s.bodyLimit
// bytes, application/json in UTF-8 without a content coding (checkContent), exactly one JSON value of dst's shape (no unknown
// or duplicate members, no wrong types, no trailing data, integers only where
// integers belong), then validator tags. Every failure is a 4xx *Error
// naming the field.
func (s *Server) decode(c echo.Context, dst any) error {
	return s.decodeBody(c, dst, false)
}

// decodeOptional is decode for routes whose body may be absent: an empty
// body (whatever its Content-Type) leaves dst as it is.
func (s *Server) decodeOptional(c echo.Context, dst any) error {
	return s.decodeBody(c, dst, true)
}

func (s *Server) decodeBody(c echo.Context, dst any, optional bool) error {
	req := c.Request()
	if optional && req.ContentLength == 0 {
		return s.check(dst)
	}
	bd := bodies.Get().(*body)
	buf := &bd.buf
	defer func() {
		bd.lr.R = nil
		if buf.Cap() <= 1<<16 {
			buf.Reset()
			bodies.Put(bd)
		}
	}()
	buf.Reset()
	bd.lr = io.LimitedReader{R: req.Body, N: s.bodyLimit + 1}
	n, err := buf.ReadFrom(&bd.lr)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(s.bodyLimit)
		}
		return Invalid("", "the body could not be read")
	}
	if n > s.bodyLimit {
		return tooLarge(s.bodyLimit)
	}
	if optional && n == 0 {
		return s.check(dst)
	}
	if err := checkContent(c); err != nil {
		return err
	}
	if fb, ok := dst.(fastBody); ok && fb.decodeFast(buf.Bytes()) { // consume_fast.go
		if fb.tagsHold() {
			return validateMethod(dst)
		}
		return s.check(dst)
	}
	if err := DecodeJSON(buf.Bytes(), dst); err != nil {
		return err
	}
	return s.check(dst)
}

// tooLarge is problem.TooLarge as a handler's error.
func tooLarge(limit int64) *Error {
	p := problem.TooLarge(limit)
	return &Error{Status: p.Status, Kind: problem.BodyTooLarge, Detail: p.Detail, Errors: p.Errors}
}

// checkContent refuses a body Stipend would misread (415, naming the
// header): one with a content coding (Content-Encoding: gzip…), which is
// never decoded, so it would be parsed as if it were plain; or one whose
// media type is not application/json in UTF-8 (a charset other than utf-8,
// another type, "+json" types such as application/json-patch+json, whose
// meaning differs).
func checkContent(c echo.Context) *Error {
	h := c.Request().Header
	for _, coding := range h.Values(echo.HeaderContentEncoding) {
		if !strings.EqualFold(strings.TrimSpace(coding), "identity") {
			// RFC 7694: a 415 for a content coding says which are accepted.
			c.Response().Header().Set(echo.HeaderAcceptEncoding, "identity")
			return unsupported(echo.HeaderContentEncoding, "must be absent or identity: the body must not be compressed or otherwise encoded")
		}
	}
	ct := h.Get(echo.HeaderContentType)
	if ct == "application/json" { // what nearly every client sends: no parsing
		return nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return unsupported(echo.HeaderContentType, "must be application/json")
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return unsupported(echo.HeaderContentType, "the only charset is utf-8 (JSON is UTF-8)")
	}
	return nil
}

// unsupported is a 415 naming header.
func unsupported(header, detail string) *Error {
	return &Error{Status: http.StatusUnsupportedMediaType, Kind: problem.UnsupportedMediaType,
		Detail: header + ": " + detail, Errors: []problem.FieldError{{Field: header, Detail: detail}}}
}
