package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/problem"
)

// Problem is an error answer of the API: the server's RFC 9457 problem
// document (problem.Problem; Type is one of the problem.Kind URIs), or a
// stand-in built from the status line when the body is not one.
type Problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail"`
	Instance string `json:"instance,omitempty"`
	// Errors lists the request fields that failed validation.
	Errors []problem.FieldError `json:"errors,omitempty"`
	// Reasons says, for a 402, why each entitlement could not pay.
	Reasons []entitlement.Denial `json:"reasons,omitempty"`
	// RequestID is the server's id for the request, for its logs.
	RequestID string `json:"requestId,omitempty"`
	// ProviderRequestID is Stripe's id of the request Stipend made, on a
	// 502 provider-error or a 400 Stripe refused.
	ProviderRequestID string `json:"providerRequestId,omitempty"`
	// RetryAfter is the server's Retry-After header, if any (seconds only).
	RetryAfter time.Duration `json:"-"`
}

func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "stipend: %d", p.Status)
	if t := cmpOr(p.Title, http.StatusText(p.Status)); t != "" {
		b.WriteString(" " + t)
	}
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	for _, f := range p.Errors {
		fmt.Fprintf(&b, "; %s: %s", f.Field, f.Detail)
	}
	for _, r := range p.Reasons {
		if r.EntitlementID != "" {
			fmt.Fprintf(&b, "; %s: %s", r.EntitlementID, r.Reason)
		} else {
			fmt.Fprintf(&b, "; %s", r.Reason)
		}
		if r.MemberID != "" {
			fmt.Fprintf(&b, " (member %s, %s)", r.MemberID, r.Limit)
		}
	}
	return b.String()
}

// problemOf turns a non-2xx answer into a *Problem.
func problemOf(resp *http.Response, body []byte) *Problem {
	p := &Problem{}
	if json.Unmarshal(body, p) != nil {
		p = &Problem{Detail: strings.TrimSpace(string(truncate(body, 200)))}
	}
	p.Status = resp.StatusCode // the status line is authoritative
	p.RetryAfter = retryAfter(resp.Header.Get("Retry-After"))
	return p
}

func truncate(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

func cmpOr(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}

func statusOf(err error) int {
	var p *Problem
	if errors.As(err, &p) {
		return p.Status
	}
	return 0
}

// IsPaymentRequired reports whether err is a 402: no entitlement covers the
// call. The *Problem's Reasons say why.
func IsPaymentRequired(err error) bool { return statusOf(err) == http.StatusPaymentRequired }

// IsConflict reports whether err is a 409: a state change the resource
// does not allow now (IsHoldExpired, IsHoldConflict and IsRefundRefused say
// which, for holds and refunds), or a request with the same Idempotency-Key
// still in progress. An idempotency key reused for other parameters is not
// a conflict but IsKeyReused.
func IsConflict(err error) bool { return statusOf(err) == http.StatusConflict }

// IsKeyReused reports whether err is a 422 idempotency-key-reused (the only
// 422 Stipend answers): the idempotency key, in the body of a consume, check
// or authorize or in the Idempotency-Key header, was used before for a
// request with other parameters, which was not repeated. Nothing was done;
// send the request with a new key.
func IsKeyReused(err error) bool { return statusOf(err) == http.StatusUnprocessableEntity }

// IsNotFound reports whether err is a 404.
func IsNotFound(err error) bool { return statusOf(err) == http.StatusNotFound }

// IsInvalid reports whether err is a 400: the request itself is wrong
// (Problem.Errors names the fields). The client answers one itself, sending
// nothing and with no RequestID, for a request it can tell the server would
// refuse: an invalid amount, agent ID or consume parameters, or a missing
// Idempotency-Key.
func IsInvalid(err error) bool { return statusOf(err) == http.StatusBadRequest }

// IsUnauthorized reports whether err is a 401 or 403: the key is missing,
// unknown, or its role may not do this.
func IsUnauthorized(err error) bool {
	s := statusOf(err)
	return s == http.StatusUnauthorized || s == http.StatusForbidden
}

// IsUnavailable reports whether err means Stipend could not give an answer:
// no HTTP answer at all (after the retries), a 5xx, a 429 (too many
// requests: the service or its platform is overloaded), or the context
// ending first. Whether a mutating call took effect is then unknown;
// repeating it with the same idempotency key is safe.
func IsUnavailable(err error) bool {
	var ne *NetworkError
	if errors.As(err, &ne) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	s := statusOf(err)
	return s >= 500 || s == http.StatusTooManyRequests
}

// isKind reports whether err is a *Problem of kind k.
func isKind(err error, k problem.Kind) bool {
	var p *Problem
	return errors.As(err, &p) && p.Type == k.URI()
}

// IsHoldExpired reports whether err is a 409 hold-expired: the hold's time
// was up before the capture, what it reserved was given back and nothing
// was charged.
func IsHoldExpired(err error) bool { return isKind(err, problem.HoldExpired) }

// IsHoldConflict reports whether err is a 409 hold-conflict: the hold had
// already ended another way (released, or captured with another amount).
func IsHoldConflict(err error) bool { return isKind(err, problem.HoldConflict) }

// IsRefundRefused reports whether err is a 409 refund-refused: the
// entitlement is revoked, the consumption is from an earlier quota period,
// or it was already refunded with another amount.
func IsRefundRefused(err error) bool { return isKind(err, problem.RefundRefused) }
