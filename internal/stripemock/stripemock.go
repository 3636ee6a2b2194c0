// Package stripemock gives tests the stripe-mock server scripts/test starts
// (STIPEND_TEST_STRIPE_URL). Without it a test skips with a message saying
// so, except under CI=true, where a missing stripe-mock fails the test.
package stripemock

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/stipend-mcp/stipend/internal/testenv"
	"github.com/stipend-mcp/stipend/stripepay"
)

// Key is a test-mode secret key stripe-mock accepts.
const Key = "sk_test_stipend"

// URL returns stripe-mock's base URL, or skips (fails under CI=true) tb.
func URL(tb testing.TB) string {
	tb.Helper()
	return testenv.Service(tb, "STIPEND_TEST_STRIPE_URL", "the Stripe API suites")
}

// Client returns a stripepay client of the stripe-mock at base, without
// network retries (a failure is the test's to see at once).
func Client(tb testing.TB, base string) *stripepay.Client {
	tb.Helper()
	c, err := stripepay.New(stripepay.Config{SecretKey: Key, URL: base, MaxNetworkRetries: new(int64)})
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

// Patched starts a server in front of the stripe-mock at base that passes
// every request on and sets, in each JSON object it answers, the top-level
// fields of patch (a status, an amount received). stripe-mock answers
// fixtures whatever the object's real state; this is how a test reads an
// object of stripe-mock's shape in the state it needs (a succeeded intent,
// an expired session). It is stopped with the test.
func Patched(tb testing.TB, base string, patch map[string]any) string {
	tb.Helper()
	return proxy(tb, base, "", patch)
}

// Misrouted starts a server in front of the stripe-mock at base that passes
// every request on under a path prefix stripe-mock routes nowhere, so each
// is answered with stripe-mock's own error (404 invalid_request_error, with
// its Request-Id): a Stripe that refuses every call. It is stopped with the
// test.
func Misrouted(tb testing.TB, base string) string {
	tb.Helper()
	return proxy(tb, base, "/stipend-misrouted", nil)
}

// Request is a request a Recording server passed on: its method, path,
// Idempotency-Key header and form.
type Request struct {
	Method, Path, IdempotencyKey string
	Form                         url.Values
}

// Recording starts a server in front of the stripe-mock at base that
// passes every request on and records it; requests returns what it
// recorded so far. It is stopped with the test.
func Recording(tb testing.TB, base string) (srvURL string, requests func() []Request) {
	tb.Helper()
	var mu sync.Mutex
	var got []Request
	srvURL = proxyWith(tb, base, "", nil, func(r *http.Request, body []byte) {
		form, _ := url.ParseQuery(string(body))
		mu.Lock()
		got = append(got, Request{Method: r.Method, Path: r.URL.Path, IdempotencyKey: r.Header.Get("Idempotency-Key"), Form: form})
		mu.Unlock()
	})
	return srvURL, func() []Request {
		mu.Lock()
		defer mu.Unlock()
		return append([]Request(nil), got...)
	}
}

func proxy(tb testing.TB, base, prefix string, patch map[string]any) string {
	return proxyWith(tb, base, prefix, patch, nil)
}

// proxyWith passes requests on to base under prefix, hands each (with its
// body) to record if set, and patches the JSON objects answered.
func proxyWith(tb testing.TB, base, prefix string, patch map[string]any, record func(*http.Request, []byte)) string {
	target, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		in, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if record != nil {
			record(r, in)
		}
		out, err := http.NewRequestWithContext(r.Context(), r.Method, target.JoinPath(prefix, r.URL.Path).String()+"?"+r.URL.RawQuery, bytes.NewReader(in))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		out.Header = r.Header.Clone()
		res, err := http.DefaultClient.Do(out)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		var obj map[string]any
		if res.StatusCode == http.StatusOK && json.Unmarshal(body, &obj) == nil {
			for k, v := range patch {
				obj[k] = v
			}
			body, _ = json.Marshal(obj)
		}
		for k, vs := range res.Header {
			w.Header()[k] = vs
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(res.StatusCode)
		_, _ = io.Copy(w, bytes.NewReader(body))
	}))
	tb.Cleanup(srv.Close)
	return srv.URL
}
