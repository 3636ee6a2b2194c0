// Package portal is the end user's wallet: portal sessions (short-lived,
// single-agent credentials minted by a billing or admin key), and the page
// served at /portal and as the MCP App ui://stipend/wallet, whose built
// assets are embedded in the binary (assets.go).
package portal

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Lifetimes of a session: DefaultTTL when the minting request names none,
// at most MaxTTL, at least MinTTL.
const (
	DefaultTTL = time.Hour
	MaxTTL     = 24 * time.Hour
	MinTTL     = time.Minute
)

// TokenPrefix starts every portal session token, so the API tells a token
// from an API key without a lookup and secret scanners recognise leaks.
const TokenPrefix = "stp_portal_"

// Session is a portal session as stored: the SHA-256 of its token, never
// the token itself.
type Session struct {
	ID      string `json:"id"`
	AgentID string `json:"agentId"`
	// TokenSHA256 is the hex SHA-256 of the raw token.
	TokenSHA256 string `json:"-"`
	// CreatedBy is the ID of the API key that minted the session.
	CreatedBy string     `json:"createdBy"`
	CreatedAt time.Time  `json:"createdAt"`
	ExpiresAt time.Time  `json:"expiresAt"`
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
}

// Clone returns a deep copy of s.
func (s Session) Clone() Session {
	if s.RevokedAt != nil {
		t := *s.RevokedAt
		s.RevokedAt = &t
	}
	return s
}

// Validate checks what every store requires of a session it creates.
func (s *Session) Validate() error {
	switch {
	case s.ID == "":
		return errors.New("id: is required")
	case s.AgentID == "":
		return errors.New("agentId: is required")
	case len(s.TokenSHA256) != 2*sha256.Size:
		return errors.New("tokenSha256: must be 64 hex digits")
	case !s.ExpiresAt.After(s.CreatedAt):
		return errors.New("expiresAt: must be after createdAt")
	}
	return nil
}

// Usable reports whether the session admits requests at now: not revoked
// and not expired.
func (s *Session) Usable(now time.Time) bool {
	return s.RevokedAt == nil && now.Before(s.ExpiresAt)
}

// New makes a session of agentID that lasts ttl from now, and its raw
// token, which is shown once and never stored.
func New(agentID, createdBy string, now time.Time, ttl time.Duration) (Session, string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return Session{}, "", err
	}
	id := uuid.NewString()
	raw := TokenPrefix + strings.ReplaceAll(id, "-", "") + "_" + hex.EncodeToString(b[:])
	now = now.UTC().Truncate(time.Microsecond)
	return Session{
		ID: id, AgentID: agentID, TokenSHA256: hashToken(raw), CreatedBy: createdBy,
		CreatedAt: now, ExpiresAt: now.Add(ttl),
	}, raw, nil
}

// IDOf returns the session ID a raw token names, false for anything that
// is not shaped as a portal token.
func IDOf(raw string) (string, bool) {
	rest, ok := strings.CutPrefix(raw, TokenPrefix)
	if !ok {
		return "", false
	}
	compact, _, ok := strings.Cut(rest, "_")
	if !ok || len(compact) != 32 {
		return "", false
	}
	id, err := uuid.Parse(compact)
	if err != nil {
		return "", false
	}
	return id.String(), true
}

// IsToken reports whether raw is shaped as a portal token (whether or not
// any session has it).
func IsToken(raw string) bool { return strings.HasPrefix(raw, TokenPrefix) }

// Matches reports, in constant time, whether raw is the token of s.
func (s *Session) Matches(raw string) bool {
	want, err := hex.DecodeString(s.TokenSHA256)
	if err != nil {
		return false
	}
	sum := sha256.Sum256([]byte(raw))
	return subtle.ConstantTimeCompare(sum[:], want) == 1
}

func hashToken(raw string) string {
	sum := sha256.Sum256([]byte(raw))
	return hex.EncodeToString(sum[:])
}
