package idempotency

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/stipend-mcp/stipend/internal/fault"
)

// Response is a stored HTTP result, replayed to later requests with the same
// key and fingerprint.
type Response struct {
	// Status is the HTTP status code.
	Status int `json:"status"`
	// Header holds the replayed headers (the middleware keeps Content-Type
	// and Location).
	Header map[string][]string `json:"header,omitempty"`
	// Body is the response body as sent.
	Body []byte `json:"body"`
}

// Size returns the serialized size the ledger bounds by MaxResponseBytes: the
// length of the JSON encoding of status, headers and the body (as a JSON
// string, so a JSON body counts about its own length).
func (r Response) Size() int {
	b, err := json.Marshal(struct {
		Status int                 `json:"status"`
		Header map[string][]string `json:"header,omitempty"`
		Body   string              `json:"body"`
	}{r.Status, r.Header, string(r.Body)})
	if err != nil {
		return MaxResponseBytes + 1
	}
	return len(b)
}

// Clone returns a deep copy of r.
func (r Response) Clone() Response {
	c := Response{Status: r.Status, Body: append([]byte(nil), r.Body...)}
	if r.Header != nil {
		c.Header = make(map[string][]string, len(r.Header))
		for k, v := range r.Header {
			c.Header[k] = append([]string(nil), v...)
		}
	}
	return c
}

// Check validates a response before a backend stores it: a real status code
// and at most MaxResponseBytes serialized (ErrResponseTooLarge otherwise).
func (r Response) Check() error {
	if r.Status < 100 || r.Status > 599 || http.StatusText(r.Status) == "" {
		return fault.Errorf(fault.CodeInvalid, "response.status: %d is not an HTTP status", r.Status)
	}
	if n := r.Size(); n > MaxResponseBytes {
		return fault.Wrap(fault.CodeInvalid, ErrResponseTooLarge, "response.body: %d bytes serialized, limit %d", n, MaxResponseBytes)
	}
	return nil
}

// CheckExpiry validates the expiry given to Complete or ResolveComplete.
func CheckExpiry(expireAt time.Time) error {
	if expireAt.IsZero() {
		return fault.Errorf(fault.CodeInvalid, "expireAt: required for a completed row")
	}
	return nil
}

// CheckReference parses ref and checks it names a row of this backend and
// collection, returning its id.
func CheckReference(ref, backend, collection string) (string, error) {
	b, c, id, err := ParseReference(ref)
	if err != nil {
		return "", fault.Wrap(fault.CodeInvalid, err, "reference")
	}
	if b != backend || c != collection {
		return "", fault.Errorf(fault.CodeInvalid, "reference: %s/%s is not this ledger (%s/%s)", b, c, backend, collection)
	}
	return id, nil
}

// String describes a response for operators without its body.
func (r Response) String() string {
	return fmt.Sprintf("%d (%d bytes)", r.Status, len(r.Body))
}

// CheckResolveComplete validates the arguments of a ResolveComplete on a
// ledger of backend and collection, and returns the id of the row ref names.
func CheckResolveComplete(ref, backend, collection string, resp Response, expireAt time.Time) (string, error) {
	id, err := CheckReference(ref, backend, collection)
	if err != nil {
		return "", err
	}
	if err := resp.Check(); err != nil {
		return "", err
	}
	if err := CheckExpiry(expireAt); err != nil {
		return "", err
	}
	return id, nil
}

// Unresolvable is the Conflict that op (resolve-delete, resolve-complete) on
// row r, named ref, answers when r is no longer as the operator inspected
// it: its update time is not expect or, when inProgress is required, it is
// no longer in progress. It is nil when r is as inspected.
func Unresolvable(op, ref string, r Record, expect time.Time, inProgress bool) error {
	if !r.UpdateTime.Equal(expect) {
		return fault.Errorf(fault.CodeConflict, "%s %s: the row changed (update time %s, expected %s)",
			op, ref, r.UpdateTime.Format(time.RFC3339Nano), expect.Format(time.RFC3339Nano))
	}
	if inProgress && r.State != StateInProgress {
		return fault.Errorf(fault.CodeConflict, "%s %s: state is %s, not in_progress", op, ref, r.State)
	}
	return nil
}
