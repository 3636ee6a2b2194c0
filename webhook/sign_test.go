package webhook_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// The example of the Standard Webhooks specification's reference libraries.
const (
	specSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	specID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	specBody   = `{"test": 2432232314}`
	specSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSign_SpecExample(t *testing.T) {
	got, err := webhook.Sign(specSecret, specID, time.Unix(1614265330, 0), []byte(specBody))
	if err != nil {
		t.Fatalf("Sign: %v", err)
	}
	if got != specSig {
		t.Errorf("Sign(spec example) = %q, want %q", got, specSig)
	}
}

// TestSetHeaders_ReferenceVerifier checks Stipend's headers with the
// Standard Webhooks reference Go library, not with Stipend's own code.
func TestSetHeaders_ReferenceVerifier(t *testing.T) {
	secret := webhook.NewSecret()
	body := []byte(`{"id":"evt","type":"payment.succeeded","data":{"cents":1500}}`)
	h := http.Header{}
	if err := webhook.SetHeaders(h, "d-1", time.Now(), body, secret); err != nil {
		t.Fatalf("SetHeaders: %v", err)
	}
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("standardwebhooks.NewWebhook: %v", err)
	}
	if err := wh.Verify(body, h); err != nil {
		t.Errorf("reference Verify: %v", err)
	}
	if err := wh.Verify(append(body, ' '), h); err == nil {
		t.Errorf("reference Verify of a changed body: got nil error, want a mismatch")
	}
}

// TestSetHeaders_TwoSecrets: during a rotation's grace period a request
// carries one signature per secret, and the reference verifier accepts it
// with either secret alone, and with no other.
func TestSetHeaders_TwoSecrets(t *testing.T) {
	current, previous := webhook.NewSecret(), webhook.NewSecret()
	body := []byte(`{"id":"evt","type":"payment.succeeded","data":{}}`)
	h := http.Header{}
	if err := webhook.SetHeaders(h, "d-2", time.Now(), body, current, previous); err != nil {
		t.Fatalf("SetHeaders: %v", err)
	}
	sigs := strings.Fields(h.Get(webhook.HeaderSignature))
	if len(sigs) != 2 || !strings.HasPrefix(sigs[0], "v1,") || !strings.HasPrefix(sigs[1], "v1,") {
		t.Fatalf("webhook-signature = %q, want two space-separated v1 signatures", h.Get(webhook.HeaderSignature))
	}
	for name, secret := range map[string]string{"current": current, "previous": previous} {
		if err := referenceVerify(t, secret, body, h); err != nil {
			t.Errorf("reference Verify with the %s secret: %v", name, err)
		}
	}
	if err := referenceVerify(t, webhook.NewSecret(), body, h); err == nil {
		t.Errorf("reference Verify with another secret: got nil error, want a mismatch")
	}
	if err := webhook.SetHeaders(http.Header{}, "d-3", time.Now(), body); err == nil {
		t.Errorf("SetHeaders without a secret: got nil error")
	}
}

// referenceVerify verifies a request with the Standard Webhooks reference
// library holding only secret, timestamp included.
func referenceVerify(t *testing.T, secret string, body []byte, h http.Header) error {
	t.Helper()
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		t.Fatalf("standardwebhooks.NewWebhook: %v", err)
	}
	return wh.Verify(body, h)
}

func TestNewSecret(t *testing.T) {
	a, b := webhook.NewSecret(), webhook.NewSecret()
	if a == b {
		t.Errorf("NewSecret twice = %q both times, want different secrets", a)
	}
	e := store.Endpoint{ID: "e", URL: "https://example.com", Secret: a}
	if err := e.Validate(); err != nil {
		t.Errorf("an endpoint with NewSecret() does not validate: %v", err)
	}
}

func TestSign_BadSecret(t *testing.T) {
	if _, err := webhook.Sign("whsec_not base64!", "id", time.Now(), nil); err == nil {
		t.Errorf("Sign with a malformed secret: got nil error")
	}
}
