package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/receipt"
)

func paymentBody(agent string, cents int64) map[string]any {
	return map[string]any{
		"agentId": agent, "amount": map[string]any{"cents": cents, "currency": "USD"}, "provider": "manual",
		"description": "top-up",
		"grant":       map[string]any{"type": "credits", "scope": map[string]any{"service": "search"}},
	}
}

func (e *env) createPayment(key string, body any) response {
	e.t.Helper()
	return e.keyedPost("/v1/payments", key, body)
}

// keyedPost posts body to path with the billing key under Idempotency-Key key.
func (e *env) keyedPost(path, key string, body any) response {
	e.t.Helper()
	return e.do(req{Method: "POST", Path: path, Key: e.keys.Billing, Body: body, Header: map[string]string{"Idempotency-Key": key}})
}

type completionBody struct {
	Payment      payment.Payment
	Receipt      receipt.Signed
	Entitlements []entitlement.Entitlement
}

func TestPayments(t *testing.T) {
	e := newEnv(t)

	res := e.createPayment("pay-1", paymentBody(agentA, 500))
	if res.Status != http.StatusCreated {
		t.Fatalf("create: status %d body %s, want 201", res.Status, res.Body)
	}
	var p payment.Payment
	res.decode(t, &p)
	if p.ID == "" || p.Status != payment.StatusPending || p.Amount.Cents != 500 {
		t.Fatalf("create: got %+v", p)
	}

	t.Run("SameKeySameBodyIs200", func(t *testing.T) {
		res := e.createPayment("pay-1", paymentBody(agentA, 500))
		var again payment.Payment
		res.decode(t, &again)
		if res.Status != http.StatusOK || again.ID != p.ID {
			t.Errorf("retry: status %d id %s, want 200 with %s", res.Status, again.ID, p.ID)
		}
	})
	t.Run("SameKeyOtherBodyIs422", func(t *testing.T) {
		res := e.createPayment("pay-1", paymentBody(agentA, 501))
		if res.Status != http.StatusUnprocessableEntity || res.problem(t).Type != problem.IdempotencyKeyReused.URI() {
			t.Errorf("reuse: status %d body %s, want 422", res.Status, res.Body)
		}
	})
	t.Run("MissingKeyIs400", func(t *testing.T) {
		res := e.do(req{Method: "POST", Path: "/v1/payments", Key: e.keys.Billing, Body: paymentBody(agentA, 1)})
		if res.Status != http.StatusBadRequest || res.problem(t).Errors[0].Field != "Idempotency-Key" {
			t.Errorf("no key: status %d body %s, want 400 naming Idempotency-Key", res.Status, res.Body)
		}
	})
	t.Run("AmountAboveCeilingIs400", func(t *testing.T) {
		res := e.createPayment("pay-big", paymentBody(agentA, 1<<53))
		if res.Status != http.StatusBadRequest || res.problem(t).Errors[0].Field != "amount.cents" {
			t.Errorf("big: status %d body %s, want 400 naming amount.cents", res.Status, res.Body)
		}
		if res := e.createPayment("pay-big", paymentBody(agentA, 5)); res.Status != http.StatusCreated {
			t.Errorf("after the refused amount, the key made no payment: status %d, want 201", res.Status)
		}
	})
	t.Run("BadGrantIs400", func(t *testing.T) {
		b := paymentBody(agentA, 5)
		b["grant"] = map[string]any{"type": "quota", "scope": map[string]any{"service": "search"}, "period": "day"}
		res := e.createPayment("pay-q", b)
		if res.Status != http.StatusBadRequest || res.problem(t).Errors[0].Field != "grant.limit" {
			t.Errorf("quota without limit: status %d body %s, want 400 naming grant.limit", res.Status, res.Body)
		}
	})

	var done completionBody
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing}).decode(t, &done)
	if done.Payment.Status != payment.StatusSucceeded || len(done.Entitlements) != 1 || done.Receipt.JWS == "" {
		t.Fatalf("succeed: got %+v", done)
	}
	if got := done.Entitlements[0].Credits.Balance.Cents; got != 500 {
		t.Errorf("granted balance = %d, want 500", got)
	}

	t.Run("ReceiptVerifiesWithServedJWKS", func(t *testing.T) {
		jwks := e.must(http.StatusOK, req{Method: "GET", Path: "/.well-known/jwks.json"})
		set, err := receipt.ParseJWKS(jwks.Body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := receipt.Verify(done.Receipt.JWS, set)
		if err != nil {
			t.Fatalf("Verify: %v", err)
		}
		if diff := cmp.Diff(done.Receipt.Receipt, got); diff != "" {
			t.Errorf("verified payload differs from the answer (-answer +verified):\n%s", diff)
		}
		if got.Issuer != "stipend-test" || got.PaymentID != p.ID {
			t.Errorf("receipt: issuer %q payment %q", got.Issuer, got.PaymentID)
		}
	})
	t.Run("SucceedTwiceIsTheSameReceipt", func(t *testing.T) {
		var again completionBody
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/succeed", Key: e.keys.Billing}).decode(t, &again)
		if again.Receipt.ID != done.Receipt.ID || len(again.Entitlements) != 1 || again.Entitlements[0].ID != done.Entitlements[0].ID {
			t.Errorf("second succeed: receipt %s entitlements %+v, want the first ones", again.Receipt.ID, again.Entitlements)
		}
	})
	t.Run("ReceiptRoutes", func(t *testing.T) {
		var r receipt.Signed
		e.must(http.StatusOK, req{Method: "GET", Path: "/v1/receipts/" + done.Receipt.ID, Key: e.keys.Reader}).decode(t, &r)
		if r.JWS != done.Receipt.JWS {
			t.Errorf("GET receipt: jws differs")
		}
		var list struct{ Items []receipt.Signed }
		e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/receipts", Key: e.keys.Reader}).decode(t, &list)
		if len(list.Items) != 1 || list.Items[0].ID != done.Receipt.ID {
			t.Errorf("list receipts: got %+v", list.Items)
		}
		e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/receipts/" + done.Receipt.ID, Key: e.keys.OtherReader})
	})
	t.Run("FailAfterSucceedIs409", func(t *testing.T) {
		p := e.must(http.StatusConflict, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/fail", Key: e.keys.Billing}).problem(t)
		if p.Type != problem.Conflict.URI() {
			t.Errorf("type = %q", p.Type)
		}
	})
	t.Run("RefundAfterPartialUse", func(t *testing.T) {
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "use", 200)})
		var refund completionBody
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + p.ID + "/refund", Key: e.keys.Billing}).decode(t, &refund)
		if refund.Payment.Status != payment.StatusRefunded || refund.Receipt.Kind != receipt.KindRefund {
			t.Fatalf("refund: got %+v", refund)
		}
		if len(refund.Receipt.Grants) != 1 || refund.Receipt.Grants[0].Balance.Cents != 300 {
			t.Errorf("refund receipt grants = %+v, want the remaining 300", refund.Receipt.Grants)
		}
		e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "after", 1)})
	})
	t.Run("FailPending", func(t *testing.T) {
		var q payment.Payment
		e.createPayment("pay-2", paymentBody(agentB, 10)).decode(t, &q)
		var failed payment.Payment
		e.must(http.StatusOK, req{Method: "POST", Path: "/v1/payments/" + q.ID + "/fail", Key: e.keys.Billing,
			Body: map[string]string{"reason": "card declined"}}).decode(t, &failed)
		if failed.Status != payment.StatusFailed || failed.FailureReason != "card declined" {
			t.Errorf("fail: got %+v", failed)
		}
		e.must(http.StatusConflict, req{Method: "POST", Path: "/v1/payments/" + q.ID + "/succeed", Key: e.keys.Billing})
	})
	t.Run("FailReasonCleaned", func(t *testing.T) {
		// Stored as a Stripe cancellation's is (payment.CleanFailureReason):
		// control characters become spaces; past the limit is a 400, and
		// so is U+0000, as in every string of a body.
		var q payment.Payment
		e.createPayment("pay-reason", paymentBody(agentB, 10)).decode(t, &q)
		path := "/v1/payments/" + q.ID + "/fail"
		wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: path, Key: e.keys.Billing,
			Body: map[string]string{"reason": strings.Repeat("é", payment.MaxFailureReasonLen+1)}}), "reason")
		wantField(t, e.must(http.StatusBadRequest, req{Method: "POST", Path: path, Key: e.keys.Billing,
			Body: map[string]string{"reason": "card\x00declined"}}), "reason")
		var failed payment.Payment
		e.must(http.StatusOK, req{Method: "POST", Path: path, Key: e.keys.Billing,
			Body: map[string]string{"reason": "card\x01declined\n\u202e" + strings.Repeat("é", payment.MaxFailureReasonLen-20)}}).decode(t, &failed)
		if want := "card declined " + strings.Repeat("é", payment.MaxFailureReasonLen-20); failed.FailureReason != want {
			t.Errorf("failureReason = %q, want %q", failed.FailureReason, want)
		}
	})
	t.Run("UnknownPaymentIs404", func(t *testing.T) {
		e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/payments/nope", Key: e.keys.Billing})
		e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/payments/nope/succeed", Key: e.keys.Billing})
	})
}

// TestOptionalBodies: routes whose body is optional take none, an empty one
// with a JSON Content-Type, or an empty object; anything else is decoded strictly.
func TestOptionalBodies(t *testing.T) {
	e := newEnv(t)
	var p payment.Payment
	e.createPayment("opt", paymentBody(agentA, 5)).decode(t, &p)
	path := "/v1/payments/" + p.ID + "/succeed"
	e.must(http.StatusOK, req{Method: "POST", Path: path, Key: e.keys.Billing})
	e.must(http.StatusOK, req{Method: "POST", Path: path, Key: e.keys.Billing, Body: ""})
	e.must(http.StatusOK, req{Method: "POST", Path: path, Key: e.keys.Billing, Body: "{}"})
	res := e.must(http.StatusBadRequest, req{Method: "POST", Path: path, Key: e.keys.Billing, Body: `{"x":1}`})
	if f := res.problem(t).Errors[0].Field; f != "x" {
		t.Errorf("unknown member: field %q, want x", f)
	}
	e.must(http.StatusUnsupportedMediaType, req{Method: "POST", Path: path, Key: e.keys.Billing, Body: "x",
		Header: map[string]string{"Content-Type": "text/plain"}})
}
