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

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// decode reads the request body into dst strictly: a JSON Content-Type, at
// most s.bodyLimit bytes, exactly one JSON value of dst's shape (no unknown
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
	buf := bufPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<16 {
			buf.Reset()
			bufPool.Put(buf)
		}
	}()
	buf.Reset()
	n, err := buf.ReadFrom(io.LimitReader(req.Body, s.bodyLimit+1))
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
	if !isJSON(req.Header.Get(echo.HeaderContentType)) {
		return &Error{Status: http.StatusUnsupportedMediaType, Kind: problem.UnsupportedMediaType,
			Detail: "the body must be application/json",
			Errors: []problem.FieldError{{Field: "Content-Type", Detail: "must be application/json"}}}
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

func isJSON(ct string) bool {
	if ct == "application/json" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && (mt == "application/json" || strings.HasSuffix(mt, "+json"))
}
