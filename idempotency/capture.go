package idempotency

import (
	"bytes"
	"net/http"
)

// capture passes a response through to the client while keeping a copy of
// its body, up to limit bytes (beyond that it only notes the overflow: such a
// response cannot be replayed anyway).
type capture struct {
	http.ResponseWriter
	limit    int
	body     bytes.Buffer
	overflow bool
}

func (w *capture) Write(b []byte) (int, error) {
	if !w.overflow {
		if w.body.Len()+len(b) > w.limit {
			w.overflow = true
			w.body = bytes.Buffer{}
		} else {
			w.body.Write(b)
		}
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets handlers that stream still flush.
func (w *capture) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *capture) Unwrap() http.ResponseWriter { return w.ResponseWriter }
