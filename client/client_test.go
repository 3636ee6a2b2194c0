package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/client"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
)

// recorder is a fake Stipend: it records every request and answers with the
// next of its canned answers (the last one repeats).
type recorder struct {
	mu       sync.Mutex
	requests []recorded
	answers  []func(w http.ResponseWriter)
}

type recorded struct {
	Method, Path, Query, Auth, IdemKey, Body string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	n := len(rc.requests)
	rc.requests = append(rc.requests, recorded{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("Authorization"), r.Header.Get("Idempotency-Key"), string(body)})
	answer := rc.answers[min(n, len(rc.answers)-1)]
	rc.mu.Unlock()
	answer(w)
}

func (rc *recorder) got() []recorded {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]recorded(nil), rc.requests...)
}

func jsonAnswer(status int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

func problemAnswer(status int, body string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	}
}

// inProcess serves each request with its handler in the calling goroutine,
// without a network: a synctest bubble's clock only moves while every
// goroutine in it waits, which one blocked reading a socket does not.
type inProcess struct{ h http.Handler }

func (p inProcess) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	p.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// dropConnection answers nothing: the connection is closed mid-request.
func dropConnection(w http.ResponseWriter) {
	conn, _, err := w.(http.Hijacker).Hijack()
	if err == nil {
		conn.Close()
	}
}

func newClient(t *testing.T, rc *recorder) *client.Client {
	t.Helper()
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	c, err := client.New(srv.URL, "key-1", client.WithRetry(4, time.Millisecond, 5*time.Millisecond))
	if err != nil {
		t.Fatalf("client.New(%q): %v", srv.URL, err)
	}
	return c
}

const consumedJSON = `{"result":"consumed","consumption":{"id":"c1","agentId":"a1","entitlementId":"e1","entitlementType":"credits","service":"s","tool":"t","idempotencyKey":"k1","cost":{"cents":5,"currency":"USD"},"units":1,"occurredAt":"2026-11-30T10:00:00Z","balanceAfter":{"cents":95,"currency":"USD"}}}`

func consumeRequest() client.ConsumeRequest {
	return client.ConsumeRequest{AgentID: "a1", Service: "s", Tool: "t", IdempotencyKey: "k1", Cost: &money.Money{Cents: 5, Currency: "USD"}}
}

func TestClient_Consume(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter){jsonAnswer(200, consumedJSON)}}
	c := newClient(t, rc)
	got, err := c.Consume(t.Context(), consumeRequest())
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	want := &client.ConsumeResult{Result: client.ResultConsumed, Consumption: entitlement.Consumption{
		ID: "c1", AgentID: "a1", EntitlementID: "e1", EntitlementType: entitlement.TypeCredits, Service: "s", Tool: "t",
		IdempotencyKey: "k1", Cost: money.Money{Cents: 5, Currency: "USD"}, Units: 1,
		OccurredAt: time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC), BalanceAfter: money.Money{Cents: 95, Currency: "USD"},
	}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Consume result (-want +got):\n%s", diff)
	}
	reqs := rc.got()
	if len(reqs) != 1 {
		t.Fatalf("got %d requests, want 1", len(reqs))
	}
	wantReq := recorded{Method: "POST", Path: "/v1/consume", Auth: "Bearer key-1",
		Body: `{"agentId":"a1","service":"s","tool":"t","idempotencyKey":"k1","cost":{"cents":5,"currency":"USD"}}`}
	if diff := cmp.Diff(wantReq, reqs[0]); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestClient_Retry(t *testing.T) {
	unavailable := problemAnswer(503, `{"type":"about:blank","title":"Service Unavailable","status":503}`)
	t.Run("ServiceUnavailableThenSuccessReusesTheKey", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){unavailable, unavailable, jsonAnswer(200, consumedJSON)}}
		c := newClient(t, rc)
		if _, err := c.Consume(t.Context(), consumeRequest()); err != nil {
			t.Fatalf("Consume: %v", err)
		}
		reqs := rc.got()
		if len(reqs) != 3 {
			t.Fatalf("got %d attempts, want 3", len(reqs))
		}
		for i, r := range reqs[1:] {
			if r.Body != reqs[0].Body {
				t.Errorf("attempt %d sent body %s, want the first attempt's %s", i+2, r.Body, reqs[0].Body)
			}
		}
	})
	for _, tc := range []struct {
		name     string
		answers  []func(http.ResponseWriter)
		ok       func(error) bool // whether Consume's error is the one wanted
		want     string
		attempts int
	}{
		{"NetworkErrorThenSuccess", []func(http.ResponseWriter){dropConnection, jsonAnswer(200, consumedJSON)},
			func(err error) bool { return err == nil }, "none", 2},
		{"GivesUpAfterAttempts", []func(http.ResponseWriter){unavailable}, client.IsUnavailable, "one IsUnavailable accepts", 4},
		{"PaymentRequiredIsNotRetried", []func(http.ResponseWriter){problemAnswer(402, `{"status":402}`)},
			client.IsPaymentRequired, "payment required", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := &recorder{answers: tc.answers}
			if _, err := newClient(t, rc).Consume(t.Context(), consumeRequest()); !tc.ok(err) {
				t.Errorf("Consume error = %v, want %s", err, tc.want)
			}
			if got := len(rc.got()); got != tc.attempts {
				t.Errorf("got %d attempts, want %d", got, tc.attempts)
			}
		})
	}
	t.Run("GrantWithoutKeyIsNotSent", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){unavailable}}
		c := newClient(t, rc)
		_, err := c.GrantEntitlement(t.Context(), "a1", "", client.EntitlementGrant{})
		var p *client.Problem
		if !client.IsInvalid(err) || !errors.As(err, &p) || p.Type != problem.IdempotencyKeyMissing.URI() {
			t.Errorf("GrantEntitlement without a key: error = %v, want a 400 idempotency-key-missing", err)
		}
		if got := len(rc.got()); got != 0 {
			t.Errorf("got %d attempts, want 0", got)
		}
	})
}

// TestClient_RetryAfter: a 429 (Cloud Run at its instance limit) is retried
// like a 503, never sooner than its Retry-After; a Retry-After beyond
// MaxRetryAfter goes back to the caller at once.
func TestClient_RetryAfter(t *testing.T) {
	withRetryAfter := func(status int, secs string) func(http.ResponseWriter) {
		return func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", secs)
			w.WriteHeader(status)
		}
	}
	t.Run("TooManyRequestsWaitsItOut", func(t *testing.T) {
		// In a synctest bubble the client's wait runs on the bubble's clock,
		// which jumps ahead once every goroutine waits: no real second passes.
		synctest.Test(t, func(t *testing.T) {
			rc := &recorder{answers: []func(http.ResponseWriter){withRetryAfter(429, "1"), jsonAnswer(200, consumedJSON)}}
			c, err := client.New("http://stipend.test", "key-1", client.WithRetry(4, time.Millisecond, 5*time.Millisecond),
				client.WithHTTPClient(&http.Client{Transport: inProcess{rc}}))
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if _, err := c.Consume(t.Context(), consumeRequest()); err != nil {
				t.Fatalf("Consume after a 429: %v", err)
			}
			if waited := time.Since(start); waited < time.Second {
				t.Errorf("retried after %v, want no sooner than the Retry-After of 1 s", waited)
			}
			if got := len(rc.got()); got != 2 {
				t.Errorf("got %d attempts, want 2", got)
			}
		})
	})
	t.Run("LongRetryAfterIsTheCallersToWait", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){withRetryAfter(503, "3600")}}
		c := newClient(t, rc)
		_, err := c.Consume(t.Context(), consumeRequest())
		var p *client.Problem
		if !client.IsUnavailable(err) || !errors.As(err, &p) || p.RetryAfter != time.Hour {
			t.Errorf("Consume error = %v, want unavailable carrying Retry-After 1h", err)
		}
		if got := len(rc.got()); got != 1 {
			t.Errorf("got %d attempts, want 1", got)
		}
	})
}

func TestClient_Deadline(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	rc := &recorder{answers: []func(http.ResponseWriter){func(w http.ResponseWriter) { <-release }}}
	c := newClient(t, rc)
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err := c.Consume(ctx, consumeRequest())
	if !client.IsUnavailable(err) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Consume past the deadline: error = %v, want unavailable and DeadlineExceeded", err)
	}
}

func TestClient_Problem(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter){problemAnswer(402, `{
		"type":"https://stipend.dev/problems/payment-required","title":"Payment Required","status":402,
		"detail":"no entitlement covers the call","reasons":[{"entitlementId":"e1","reason":"insufficient_balance"},{"reason":"not_found"}]}`)}}
	c := newClient(t, rc)
	_, err := c.Consume(t.Context(), consumeRequest())
	var p *client.Problem
	if !errors.As(err, &p) {
		t.Fatalf("Consume error = %v (%T), want a *client.Problem", err, err)
	}
	want := &client.Problem{
		Type: "https://stipend.dev/problems/payment-required", Title: "Payment Required", Status: 402,
		Detail:  "no entitlement covers the call",
		Reasons: []entitlement.Denial{{EntitlementID: "e1", Reason: entitlement.ReasonInsufficientBalance}, {Reason: entitlement.ReasonNotFound}},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("problem (-want +got):\n%s", diff)
	}
	if !client.IsPaymentRequired(err) || client.IsConflict(err) || client.IsUnavailable(err) {
		t.Errorf("classification of %v: want payment required only", err)
	}

	t.Run("FieldErrors", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){problemAnswer(400,
			`{"type":"t","status":400,"errors":[{"field":"cost.cents","detail":"must be a JSON integer"},{"field":"tool","detail":"is required"}]}`)}}
		_, err := newClient(t, rc).Consume(t.Context(), consumeRequest())
		var p *client.Problem
		if !errors.As(err, &p) || !client.IsInvalid(err) {
			t.Fatalf("Consume error = %v, want a 400 *client.Problem", err)
		}
		want := []problem.FieldError{{Field: "cost.cents", Detail: "must be a JSON integer"}, {Field: "tool", Detail: "is required"}}
		if diff := cmp.Diff(want, p.Errors); diff != "" {
			t.Errorf("field errors (-want +got):\n%s", diff)
		}
	})
	t.Run("NotProblemJSON", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){func(w http.ResponseWriter) { http.Error(w, "gateway trouble", 502) }}}
		_, err := newClient(t, rc).GetAccount(t.Context(), "a1")
		var p *client.Problem
		if !errors.As(err, &p) || p.Status != 502 || p.Detail != "gateway trouble" {
			t.Fatalf("GetAccount error = %#v, want a 502 problem with the body as detail", err)
		}
		if !client.IsUnavailable(err) {
			t.Errorf("IsUnavailable(%v) = false, want true", err)
		}
	})
	// A key reused for other parameters (422) and a conflict (409) are told apart.
	t.Run("KeyReused", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){problemAnswer(422, `{"type":"`+problem.IdempotencyKeyReused.URI()+`","status":422}`)}}
		_, err := newClient(t, rc).Consume(t.Context(), consumeRequest())
		if !client.IsKeyReused(err) || client.IsConflict(err) {
			t.Errorf("IsKeyReused(%v), IsConflict = %v, %v; want true, false", err, client.IsKeyReused(err), client.IsConflict(err))
		}
	})
	t.Run("Conflict", func(t *testing.T) {
		rc := &recorder{answers: []func(http.ResponseWriter){problemAnswer(409, `{"type":"`+problem.IdempotencyKeyInProgress.URI()+`","status":409}`)}}
		_, err := newClient(t, rc).Consume(t.Context(), consumeRequest())
		if !client.IsConflict(err) || client.IsKeyReused(err) {
			t.Errorf("IsConflict(%v), IsKeyReused = %v, %v; want true, false", err, client.IsConflict(err), client.IsKeyReused(err))
		}
	})
}

func TestClient_CreatePayment(t *testing.T) {
	created := `{"id":"p1","agentId":"a1","amount":{"cents":500,"currency":"USD"},"provider":"manual","grant":{"type":"credits","scope":{"service":"s"}},"status":"pending","createdAt":"2026-11-30T10:00:00Z","updatedAt":"2026-11-30T10:00:00Z"}`
	rc := &recorder{answers: []func(http.ResponseWriter){dropConnection, jsonAnswer(201, created), jsonAnswer(200, created)}}
	c := newClient(t, rc)
	req := client.PaymentRequest{AgentID: "a1", Amount: money.Money{Cents: 500, Currency: "USD"}, Provider: payment.ProviderManual,
		Grant: payment.Grant{Type: entitlement.TypeCredits, Scope: entitlement.Scope{Service: "s"}}}
	p, isNew, err := c.CreatePayment(t.Context(), "pay-1", req)
	if err != nil {
		t.Fatalf("CreatePayment: %v", err)
	}
	if p.ID != "p1" || p.Status != payment.StatusPending || !isNew {
		t.Errorf("CreatePayment = %s %s created=%v, want p1 pending created=true", p.ID, p.Status, isNew)
	}
	if _, isNew, err = c.CreatePayment(t.Context(), "pay-1", req); err != nil || isNew {
		t.Errorf("CreatePayment again = created %v, %v; want created false, nil", isNew, err)
	}
	for i, r := range rc.got() {
		if r.IdemKey != "pay-1" || r.Path != "/v1/payments" {
			t.Errorf("request %d: %s with Idempotency-Key %q, want /v1/payments with pay-1", i, r.Path, r.IdemKey)
		}
		var body map[string]any
		if err := json.Unmarshal([]byte(r.Body), &body); err != nil || body["agentId"] != "a1" {
			t.Errorf("request %d body %s: want agentId a1", i, r.Body)
		}
	}
}

func TestClient_Paths(t *testing.T) {
	rc := &recorder{answers: []func(http.ResponseWriter){jsonAnswer(200, `{"items":[],"nextCursor":""}`)}}
	c := newClient(t, rc)
	ctx := t.Context()
	c.ListEntitlements(ctx, "agent/1", client.EntitlementFilter{Status: entitlement.StatusActive, Service: "s"}, client.Page{Limit: 10, Cursor: "x"})
	c.ListReceipts(ctx, "a1", client.Page{})
	c.ListConsumptions(ctx, "a1", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), client.Page{})
	var got []string
	for _, r := range rc.got() {
		got = append(got, r.Method+" "+r.Path+"?"+r.Query)
	}
	want := []string{
		"GET /v1/accounts/agent/1/entitlements?cursor=x&limit=10&service=s&status=active",
		"GET /v1/accounts/a1/receipts?",
		"GET /v1/accounts/a1/consumptions?since=2026-01-02T03%3A04%3A05Z",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}
