// Package webhook delivers Stipend's outbound events to registered endpoints
// and verifies inbound provider events.
//
// Outbound: FanOut turns outbox events (store.EntitlementStore.PendingEvents)
// into one durable delivery per subscribed endpoint; a Dispatcher claims due
// deliveries from a store.DeliveryStore and sends them as Standard Webhooks
// requests (https://www.standardwebhooks.com): signed with the endpoint's
// whsec_ secret, retried on a jittered schedule, never lost when a
// dispatcher dies (its claims expire and another worker takes them over).
// Delivery is at least once; receivers deduplicate by webhook-id.
//
// Inbound: Stripe verifies a Stripe-Signature and applies the payment
// change the event describes, exactly once per Stripe event ID.
package webhook

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stipend-mcp/stipend/store"
)

// The Standard Webhooks request headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

// DefaultSecretGrace is how long a secret replaced by a rotation keeps
// signing requests, next to the new one, when the rotation names no grace
// period: time for receivers to switch to the new secret.
const DefaultSecretGrace = 24 * time.Hour

// MaxSecretGrace bounds a rotation's grace period.
const MaxSecretGrace = 7 * 24 * time.Hour

// NewSecret returns a new endpoint secret: "whsec_" and the base64 of 32
// random bytes (the HMAC key).
func NewSecret() string {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go ≥ 1.24)
	return store.SecretPrefix + base64.StdEncoding.EncodeToString(key)
}

// Sign returns the webhook-signature value for a message: "v1," and the
// base64 HMAC-SHA256, keyed with the secret's decoded key, of
// "{id}.{unix timestamp}.{body}".
func Sign(secret, id string, timestamp time.Time, body []byte) (string, error) {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, store.SecretPrefix))
	if err != nil || !strings.HasPrefix(secret, store.SecretPrefix) {
		return "", fmt.Errorf("webhook secret: not %s followed by base64", store.SecretPrefix)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id + "." + strconv.FormatInt(timestamp.Unix(), 10) + "."))
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// SetHeaders signs body as message id at timestamp with each of secrets
// and sets the three Standard Webhooks headers on h. With several secrets
// (an endpoint within the grace period of a rotation), webhook-signature
// holds one "v1," signature per secret, separated by spaces, as the
// specification allows: a receiver that holds any one of the secrets
// accepts the request.
func SetHeaders(h http.Header, id string, timestamp time.Time, body []byte, secrets ...string) error {
	if len(secrets) == 0 {
		return fmt.Errorf("webhook: no secret to sign with")
	}
	sigs := make([]string, len(secrets))
	for i, secret := range secrets {
		sig, err := Sign(secret, id, timestamp, body)
		if err != nil {
			return err
		}
		sigs[i] = sig
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(timestamp.Unix(), 10))
	h.Set(HeaderSignature, strings.Join(sigs, " "))
	return nil
}
