package problem_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/problem"
)

// kinds is every problem kind with the URI clients switch on, spelled out:
// a URI is a promise, so changing one must fail here first.
var kinds = []struct {
	kind problem.Kind
	uri  string
}{
	{problem.InvalidRequest, "https://stipend-mcp.github.io/stipend/problems/invalid-request"},
	{problem.Unauthorized, "https://stipend-mcp.github.io/stipend/problems/unauthorized"},
	{problem.PaymentRequired, "https://stipend-mcp.github.io/stipend/problems/payment-required"},
	{problem.Forbidden, "https://stipend-mcp.github.io/stipend/problems/forbidden"},
	{problem.NotFound, "https://stipend-mcp.github.io/stipend/problems/not-found"},
	{problem.MethodNotAllowed, "https://stipend-mcp.github.io/stipend/problems/method-not-allowed"},
	{problem.Conflict, "https://stipend-mcp.github.io/stipend/problems/conflict"},
	{problem.HoldConflict, "https://stipend-mcp.github.io/stipend/problems/hold-conflict"},
	{problem.HoldExpired, "https://stipend-mcp.github.io/stipend/problems/hold-expired"},
	{problem.RefundRefused, "https://stipend-mcp.github.io/stipend/problems/refund-refused"},
	{problem.BodyTooLarge, "https://stipend-mcp.github.io/stipend/problems/body-too-large"},
	{problem.UnsupportedMediaType, "https://stipend-mcp.github.io/stipend/problems/unsupported-media-type"},
	{problem.Internal, "https://stipend-mcp.github.io/stipend/problems/internal"},
	{problem.Unavailable, "https://stipend-mcp.github.io/stipend/problems/unavailable"},
	{problem.IdempotencyKeyMissing, "https://stipend-mcp.github.io/stipend/problems/idempotency-key-missing"},
	{problem.IdempotencyKeyInvalid, "https://stipend-mcp.github.io/stipend/problems/idempotency-key-invalid"},
	{problem.IdempotencyKeyInProgress, "https://stipend-mcp.github.io/stipend/problems/idempotency-key-in-progress"},
	{problem.IdempotencyKeyReused, "https://stipend-mcp.github.io/stipend/problems/idempotency-key-reused"},
	{problem.IdempotencyLedgerNotDurable, "https://stipend-mcp.github.io/stipend/problems/idempotency-ledger-not-durable"},
}

func TestKind_URIAndTitle(t *testing.T) {
	for _, k := range kinds {
		if got := k.kind.URI(); got != k.uri {
			t.Errorf("%s.URI() = %q, want %q", k.kind, got, k.uri)
		}
		if k.kind.Title() == "" {
			t.Errorf("%s.Title() = \"\", want a title", k.kind)
		}
	}
}

// TestKind_Documented: docs/api.md lists every problem type a client can
// get, by the name after …/problems/.
func TestKind_Documented(t *testing.T) {
	doc, err := os.ReadFile("../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kinds {
		if !strings.Contains(string(doc), "| `"+string(k.kind)+"` |") {
			t.Errorf("docs/api.md has no row for problem type %q", k.kind)
		}
	}
}

func TestWrite(t *testing.T) {
	p := problem.New(http.StatusPaymentRequired, problem.PaymentRequired, "no entitlement covers the call")
	p.RequestID = "req-1"
	p.Errors = []problem.FieldError{{Field: "cost.cents", Detail: "must be positive"}}
	p.Reasons = []entitlement.Denial{{EntitlementID: "e1", Reason: entitlement.ReasonInsufficientBalance}}
	t.Run("GET", func(t *testing.T) {
		rec := httptest.NewRecorder()
		if err := problem.Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), p); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if rec.Code != http.StatusPaymentRequired || rec.Header().Get("Content-Type") != problem.ContentType {
			t.Errorf("Write: status %d, Content-Type %q; want 402 %s", rec.Code, rec.Header().Get("Content-Type"), problem.ContentType)
		}
		var wire map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &wire); err != nil {
			t.Fatalf("body %s: %v", rec.Body, err)
		}
		want := map[string]any{
			"type": "https://stipend-mcp.github.io/stipend/problems/payment-required", "title": "Payment required",
			"status": 402.0, "detail": "no entitlement covers the call", "requestId": "req-1",
			"errors":  []any{map[string]any{"field": "cost.cents", "detail": "must be positive"}},
			"reasons": []any{map[string]any{"entitlementId": "e1", "reason": "insufficient_balance"}},
		}
		if diff := cmp.Diff(want, wire); diff != "" {
			t.Errorf("Write body (-want +got):\n%s", diff)
		}
	})
	t.Run("NotHTMLEscaped", func(t *testing.T) {
		// The 401's detail reads as written: no \u003ckey\u003e.
		q := problem.New(http.StatusUnauthorized, problem.Unauthorized, "send an API key as Authorization: Bearer <key> & retry")
		rec := httptest.NewRecorder()
		if err := problem.Write(rec, httptest.NewRequest(http.MethodGet, "/", nil), q); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if body := rec.Body.String(); !strings.Contains(body, `"detail":"send an API key as Authorization: Bearer <key> & retry"`) || strings.HasSuffix(body, "\n") {
			t.Errorf("Write body = %s; want the detail unescaped and no trailing newline", body)
		}
	})
	t.Run("HEAD", func(t *testing.T) {
		rec := httptest.NewRecorder()
		if err := problem.Write(rec, httptest.NewRequest(http.MethodHead, "/", nil), p); err != nil {
			t.Fatalf("Write: %v", err)
		}
		if rec.Code != http.StatusPaymentRequired || rec.Body.Len() != 0 {
			t.Errorf("Write(HEAD): status %d, body %q; want 402 and no body", rec.Code, rec.Body)
		}
	})
}

func TestTooLarge(t *testing.T) {
	p := problem.TooLarge(65536)
	want := problem.Problem{Type: problem.BodyTooLarge.URI(), Title: problem.BodyTooLarge.Title(), Status: http.StatusRequestEntityTooLarge,
		Detail: "the body must be at most 65536 bytes", Errors: []problem.FieldError{{Field: "", Detail: "the body must be at most 65536 bytes"}}}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("TooLarge(65536) (-want +got):\n%s", diff)
	}
}
