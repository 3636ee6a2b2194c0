package store

import (
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stipend-mcp/stipend/event"
)

// SecretPrefix starts every webhook endpoint secret (Standard Webhooks:
// "whsec_" followed by the base64 of the HMAC key).
const SecretPrefix = "whsec_"

// Endpoint is a receiver of outbound webhooks.
type Endpoint struct {
	ID  string `json:"id"`
	URL string `json:"url"`
	// EventTypes are the event types the endpoint receives; empty means all.
	EventTypes []event.Type `json:"eventTypes"`
	// Secret signs every request to the endpoint. It is stored and returned
	// by the store; the HTTP API shows it only when it is made (creation
	// and rotation).
	Secret string `json:"-"`
	// PreviousSecret is the secret the last rotation replaced; until
	// PreviousSecretExpiresAt it signs every request too, next to Secret,
	// so a receiver still holding it keeps accepting (see SigningSecrets).
	PreviousSecret          string     `json:"-"`
	PreviousSecretExpiresAt *time.Time `json:"previousSecretExpiresAt,omitempty"`
	Disabled                bool       `json:"disabled"`
	DisabledReason          string     `json:"disabledReason,omitempty"`
	DisabledAt              *time.Time `json:"disabledAt,omitempty"`
	CreatedAt               time.Time  `json:"createdAt"`
}

// Subscribes reports whether the endpoint is enabled and receives events of type t.
func (e *Endpoint) Subscribes(t event.Type) bool {
	if e.Disabled {
		return false
	}
	return len(e.EventTypes) == 0 || slices.Contains(e.EventTypes, t)
}

// SigningSecrets returns the secrets that sign a request sent at now:
// Secret, then PreviousSecret while its grace period lasts.
func (e *Endpoint) SigningSecrets(now time.Time) []string {
	if e.InGrace(now) {
		return []string{e.Secret, e.PreviousSecret}
	}
	return []string{e.Secret}
}

// InGrace reports whether the previous secret still signs requests at now.
func (e *Endpoint) InGrace(now time.Time) bool {
	return e.PreviousSecret != "" && e.PreviousSecretExpiresAt != nil && now.Before(*e.PreviousSecretExpiresAt)
}

// Validate checks what every store requires of an endpoint and names the
// offending field: an ID, an absolute http(s) URL without credentials and
// with a port in 1–65535 if it names one, known event types and a secret
// with SecretPrefix. Which hosts may receive is not the store's rule: the
// webhook package refuses private targets (webhook.CheckTarget).
func (e *Endpoint) Validate() error {
	if e.ID == "" {
		return Errorf(CodeInvalid, "id: required")
	}
	if err := ValidateURL(e.URL); err != nil {
		return err
	}
	for i, t := range e.EventTypes {
		if !slices.Contains(event.Types, t) {
			return Errorf(CodeInvalid, "eventTypes[%d]: unknown event type %q", i, t)
		}
	}
	if err := CheckSecret("secret", e.Secret); err != nil {
		return err
	}
	if e.PreviousSecret != "" {
		return CheckSecret("previousSecret", e.PreviousSecret)
	}
	return nil
}

// ValidSecret reports whether s has the shape of an endpoint secret:
// SecretPrefix and at least 16 more characters.
func ValidSecret(s string) bool {
	return strings.HasPrefix(s, SecretPrefix) && len(s) >= len(SecretPrefix)+16
}

// CheckSecret is nil when s is ValidSecret, and otherwise an Invalid error
// naming field.
func CheckSecret(field, s string) error {
	if ValidSecret(s) {
		return nil
	}
	return Errorf(CodeInvalid, "%s: must start with %q and hold at least 16 more characters", field, SecretPrefix)
}

// ValidateURL is Validate's rule for an endpoint URL: absolute http or
// https, a host, no credentials, and a port in 1–65535 if it names one.
// The error is Invalid and names the field url.
func ValidateURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Hostname() == "" || u.User != nil {
		return Errorf(CodeInvalid, "url: must be an absolute http or https URL without credentials")
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return Errorf(CodeInvalid, "url: port %s is out of range (1–65535)", p)
		}
	}
	return nil
}

// EndpointUpdate is a change UpdateEndpoint makes; nil fields and a false
// Enable leave the endpoint as it is.
type EndpointUpdate struct {
	// URL replaces the endpoint's URL.
	URL *string
	// EventTypes replaces the endpoint's event types; an empty slice
	// subscribes it to every type.
	EventTypes *[]event.Type
	// Enable enables a disabled endpoint again (after a 410 Gone, or an
	// operator's disable): Disabled false, DisabledReason and DisabledAt
	// cleared. It changes nothing on an enabled endpoint.
	Enable bool
}
