package idempotency

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/stipend-mcp/stipend/problem"
)

// KeyError is an Idempotency-Key header ParseKey refused. Every route that
// takes the header answers it with the same 400 problem (Problem).
type KeyError struct {
	// Kind is problem.IdempotencyKeyMissing or problem.IdempotencyKeyInvalid.
	Kind problem.Kind
	// Detail says what is wrong with the header.
	Detail string
}

// Error describes the refusal.
func (e *KeyError) Error() string { return HeaderKey + ": " + e.Detail }

// Problem returns the 400 answer, naming the header in its errors.
func (e *KeyError) Problem() problem.Problem {
	p := problem.New(http.StatusBadRequest, e.Kind, e.Error())
	p.Errors = []problem.FieldError{{Field: HeaderKey, Detail: e.Detail}}
	return p
}

// ParseKey reads the Idempotency-Key header of h: the one rule of every
// route that takes it, the ledger's and POST /v1/payments alike. The IETF
// draft makes the header a structured-field string ("…"); a bare token is
// accepted too, and names the same key as its quoted form. The key must be
// sent once, and be 1–MaxKeyLen printable ASCII characters without quotes
// or backslashes (so the quoted form needs no escapes); surrounding white
// space is not part of it. A refused header is a *KeyError.
func ParseKey(h http.Header) (string, error) {
	values := h.Values(HeaderKey)
	if len(values) == 0 {
		return "", &KeyError{Kind: problem.IdempotencyKeyMissing,
			Detail: "is required on this route: send a unique key per request, and the same key when retrying it"}
	}
	invalid := func(detail string) (string, error) {
		return "", &KeyError{Kind: problem.IdempotencyKeyInvalid, Detail: detail}
	}
	if len(values) > 1 {
		return invalid("sent more than once")
	}
	key := strings.Trim(values[0], " \t")
	if len(key) >= 2 && key[0] == '"' && key[len(key)-1] == '"' {
		key = key[1 : len(key)-1]
	}
	switch {
	case key == "":
		return invalid("empty")
	case len(key) > MaxKeyLen:
		return invalid(fmt.Sprintf("longer than %d characters", MaxKeyLen))
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x20 || key[i] > 0x7e || key[i] == '"' || key[i] == '\\' {
			return invalid(fmt.Sprintf("must be 1–%d printable ASCII characters without quotes or backslashes", MaxKeyLen))
		}
	}
	return key, nil
}
