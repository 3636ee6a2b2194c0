// Package client is a typed Go client for Stipend's REST API.
//
// Every call takes a context whose deadline bounds the whole call, retries
// included. Calls that are safe to repeat (reads; consume, check and
// authorize, which carry their idempotency key in the body; capture and
// release of a hold, idempotent by nature; and writes sent with an
// Idempotency-Key header) are retried on network errors and on 503 with
// jittered exponential backoff, sending the same body and the same key each
// time, so a retry is never charged twice. Error answers are *Problem values
// (RFC 9457 problem+json); classify them with IsPaymentRequired, IsInvalid,
// IsKeyReused, IsConflict, IsNotFound, IsUnauthorized and IsUnavailable, and
// the hold and refund refusals with IsHoldExpired, IsHoldConflict and
// IsRefundRefused. A request the server would refuse for its content (an
// invalid amount, such as a lower-case currency) is refused before it is
// sent, with the *Problem the server would answer (IsInvalid).
//
// Webhook endpoints and deliveries are the store's own types
// (store.Endpoint, store.Delivery); the JWKS is receipt.JWKS, which
// receipt.Verify takes. The List methods answer one page; the All methods
// range over every item of a list (iter.Seq2), page after page.
//
// The package stays light: beyond the standard library and Stipend's domain
// packages it imports github.com/google/uuid and, through package money,
// github.com/go-json-experiment/json, and through package receipt (for
// signed receipts), github.com/go-jose/go-jose/v4 and
// github.com/gowebpki/jcs; none of the server's dependencies. go.mod says
// which of the module's requirements only its tests use.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stipend-mcp/stipend/field"
)

// Defaults for New.
const (
	DefaultAttempts   = 4
	DefaultMinBackoff = 50 * time.Millisecond
	DefaultMaxBackoff = 2 * time.Second
	// maxResponseBytes bounds what the client reads of any answer.
	maxResponseBytes = 4 << 20
)

// Client calls one Stipend server with one API key. It is safe for concurrent use.
type Client struct {
	base       string
	key        string
	http       *http.Client
	attempts   int
	minBackoff time.Duration
	maxBackoff time.Duration
	userAgent  string
}

// Option configures a Client.
type Option func(*Client)

// WithHTTPClient makes the client send its requests through hc.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.http = hc } }

// WithRetry sets how many attempts a retryable call makes in all (1 means no
// retry) and the bounds of the jittered exponential backoff between them.
func WithRetry(attempts int, minBackoff, maxBackoff time.Duration) Option {
	return func(c *Client) {
		c.attempts, c.minBackoff, c.maxBackoff = max(attempts, 1), minBackoff, max(maxBackoff, minBackoff)
	}
}

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// New returns a client for the Stipend server at baseURL (such as
// "http://127.0.0.1:8080") that authenticates with apiKey.
func New(baseURL, apiKey string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: base URL %q must be an absolute http(s) URL", baseURL)
	}
	c := &Client{
		base:       strings.TrimSuffix(u.String(), "/"),
		key:        apiKey,
		http:       defaultHTTPClient(),
		attempts:   DefaultAttempts,
		minBackoff: DefaultMinBackoff,
		maxBackoff: DefaultMaxBackoff,
		userAgent:  "stipend-go-client",
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// MaxIdleConnsPerHost is how many idle connections to Stipend the default
// HTTP client keeps. An MCP host charges tool calls in parallel; Go's default
// of 2 would open and close a connection for most of them.
const MaxIdleConnsPerHost = 64

func defaultHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	return &http.Client{Transport: t}
}

// call is one API request.
type call struct {
	method string
	path   string // already escaped
	query  url.Values
	body   any
	// idemKey is sent as the Idempotency-Key header.
	idemKey string
	// keyRequired says the route requires an Idempotency-Key.
	keyRequired bool
	// retry says the request may be sent again after a network error or 503.
	retry bool
}

// do performs c and decodes a 2xx answer into out (if non-nil). It returns
// the status code of the final answer.
func (cl *Client) do(ctx context.Context, c call, out any) (int, error) {
	if c.keyRequired && c.idemKey == "" {
		return 0, keyMissing()
	}
	if b, ok := c.body.(checker); ok {
		if err := b.check(); err != nil {
			return 0, invalid(err)
		}
	}
	var body []byte
	if c.body != nil {
		var err error
		if body, err = json.Marshal(c.body); err != nil {
			var fe *field.Error
			if errors.As(err, &fe) { // a value a check does not cover
				return 0, invalid(fe)
			}
			return 0, fmt.Errorf("client: encoding %s %s: %w", c.method, c.path, err)
		}
	}
	target := cl.base + c.path
	if len(c.query) > 0 {
		target += "?" + c.query.Encode()
	}
	attempts := 1
	if c.retry {
		attempts = cl.attempts
	}
	var lastErr error
	for i := range attempts {
		if i > 0 {
			if err := cl.wait(ctx, i, lastErr); err != nil {
				return 0, lastErr
			}
		}
		status, err := cl.once(ctx, c, target, body, out)
		if err == nil || !retryable(err) || ctx.Err() != nil {
			return status, err
		}
		lastErr = err
	}
	return 0, lastErr
}

// reasonBody is the optional body of the calls that record a reason
// (FailPayment, DisableWebhookEndpoint).
type reasonBody struct {
	Reason string `json:"reason,omitempty"`
}

// fetch makes the call c and decodes its answer into a new T: how every
// method that answers a document calls the service.
func fetch[T any](ctx context.Context, cl *Client, c call) (*T, error) {
	var out T
	if _, err := cl.do(ctx, c, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// create makes the call c, a POST that may create a document, and decodes
// its answer into a new T: created is true when the service made it (201),
// false when it answered an earlier call's document.
func create[T any](ctx context.Context, cl *Client, c call) (doc *T, created bool, err error) {
	var out T
	status, err := cl.do(ctx, c, &out)
	if err != nil {
		return nil, false, err
	}
	return &out, status == http.StatusCreated, nil
}

// once sends one attempt.
func (cl *Client) once(ctx context.Context, c call, target string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, c.method, target, rd)
	if err != nil {
		return 0, fmt.Errorf("client: %w", err)
	}
	req.Header.Set("Accept", "application/json, application/problem+json")
	req.Header.Set("User-Agent", cl.userAgent)
	if cl.key != "" {
		req.Header.Set("Authorization", "Bearer "+cl.key)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.idemKey != "" {
		req.Header.Set("Idempotency-Key", c.idemKey)
	}
	resp, err := cl.http.Do(req)
	if err != nil {
		return 0, &NetworkError{Op: c.method + " " + c.path, Err: err}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))
	if err != nil {
		return resp.StatusCode, &NetworkError{Op: c.method + " " + c.path, Err: err}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return resp.StatusCode, problemOf(resp, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("client: decoding the answer to %s %s: %w", c.method, c.path, err)
		}
	}
	return resp.StatusCode, nil
}

// wait sleeps before attempt i (1-based retry count): full jitter over an
// exponentially growing window, but never less than the server's
// Retry-After (retryable gives up on one longer than MaxRetryAfter). It
// returns the context's error if the context ends first.
func (cl *Client) wait(ctx context.Context, i int, last error) error {
	window := cl.minBackoff << (i - 1)
	if window > cl.maxBackoff || window <= 0 {
		window = cl.maxBackoff
	}
	d := time.Duration(rand.Int64N(int64(window) + 1))
	var p *Problem
	if errors.As(last, &p) && p.RetryAfter > d {
		d = p.RetryAfter
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// MaxRetryAfter is the longest Retry-After the client waits out itself; a
// longer one ends the retries and the error goes to the caller.
const MaxRetryAfter = 10 * time.Second

// retryable reports whether an attempt's error may be retried: a network
// failure, or a 503 or 429 (an overloaded service or platform, such as Cloud
// Run at its instance limit) whose Retry-After, if any, is at most
// MaxRetryAfter.
func retryable(err error) bool {
	var ne *NetworkError
	if errors.As(err, &ne) {
		return true
	}
	var p *Problem
	return errors.As(err, &p) && (p.Status == http.StatusServiceUnavailable || p.Status == http.StatusTooManyRequests) &&
		p.RetryAfter <= MaxRetryAfter
}

// retryAfter parses a Retry-After header given in seconds.
func retryAfter(h string) time.Duration {
	if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n >= 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}

// NetworkError is a request that got no HTTP answer: the connection failed,
// timed out or broke while reading.
type NetworkError struct {
	Op  string
	Err error
}

func (e *NetworkError) Error() string { return "client: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the transport's error.
func (e *NetworkError) Unwrap() error { return e.Err }

func seg(s string) string { return url.PathEscape(s) }
