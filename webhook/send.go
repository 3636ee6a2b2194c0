package webhook

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// UserAgent identifies Stipend's webhook requests.
const UserAgent = "Stipend-Webhooks/1"

// sender makes the HTTP request of one attempt.
type sender struct {
	client  *http.Client
	timeout time.Duration
	now     func() time.Time
}

// sent is the outcome of one request: the response status (0 if none) and
// its Retry-After, or the error that prevented a response.
type sent struct {
	status     int
	retryAfter time.Duration
	err        error
}

func (s sent) describe() string {
	if s.err != nil {
		return s.err.Error()
	}
	return fmt.Sprintf("the receiver answered %d %s", s.status, http.StatusText(s.status))
}

// send POSTs the delivery's stored payload to the endpoint, signed with its
// secret (and its previous one during a rotation's grace period), with the
// delivery ID as webhook-id (the same on every attempt).
func (s *sender) send(ctx context.Context, ep *store.Endpoint, del *store.Delivery) sent {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, bytes.NewReader(del.Payload))
	if err != nil {
		return sent{err: fmt.Errorf("building the request: %w", err)}
	}
	now := s.now()
	if err := SetHeaders(req.Header, del.ID, now, del.Payload, ep.SigningSecrets(now)...); err != nil {
		return sent{err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	resp, err := s.client.Do(req)
	if err != nil {
		return sent{err: err}
	}
	defer resp.Body.Close()
	// Read (a bounded part of) the body so the connection can be reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return sent{status: resp.StatusCode, retryAfter: retryAfter(resp.Header, now)}
}
