// Package apikey holds Stipend's API keys: roles, the key file format, and
// constant-time lookup. Raw keys are never stored: the key file holds the hex
// SHA-256 of each key.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Role is what a key may do.
type Role string

// The roles.
const (
	// RoleHost may consume and check (MCP hosts, on every tool call).
	RoleHost Role = "host"
	// RoleBilling may manage accounts, payments and receipts.
	RoleBilling Role = "billing"
	// RoleAdmin may do everything.
	RoleAdmin Role = "admin"
	// RoleReader may read the accounts of its listed agents (end-user UIs).
	RoleReader Role = "reader"
	// RolePortal is a portal session's (package portal), never a key
	// file's: it reads one agent through the routes api admits it on.
	RolePortal Role = "portal"
)

// Roles lists every role.
var Roles = []Role{RoleHost, RoleBilling, RoleAdmin, RoleReader}

// Valid reports whether r is a known role.
func (r Role) Valid() bool { return slices.Contains(Roles, r) }

// Key is one entry of the key file.
type Key struct {
	ID     string   `json:"id"`
	Role   Role     `json:"role"`
	SHA256 string   `json:"sha256"`
	Agents []string `json:"agents,omitempty"`
}

// MayRead reports whether a reader key (or portal session) may read agentID's data. Other roles
// are not limited to agents; their route permissions are checked elsewhere.
func (k *Key) MayRead(agentID string) bool {
	return (k.Role != RoleReader && k.Role != RolePortal) || slices.Contains(k.Agents, agentID)
}

// File is the JSON key file: {"keys": [...]}.
type File struct {
	Keys []Key `json:"keys"`
}

// Set is a validated set of keys, looked up by raw key.
type Set struct {
	keys   []Key
	hashes [][sha256.Size]byte
}

// NewSet validates keys: unique IDs, known roles, 64-hex-digit hashes, and
// agents only (and always) on reader keys.
func NewSet(keys []Key) (*Set, error) {
	s := &Set{}
	seen := map[string]bool{}
	hashes := map[string]string{} // SHA256 → the ID that has it
	for i, k := range keys {
		switch {
		case k.ID == "":
			return nil, fmt.Errorf("keys[%d].id: is required", i)
		case seen[k.ID]:
			return nil, fmt.Errorf("keys[%d].id: %q is used twice", i, k.ID)
		case !k.Role.Valid():
			return nil, fmt.Errorf("keys[%d].role: %q is not one of host, billing, admin, reader", i, k.Role)
		case k.Role == RoleReader && len(k.Agents) == 0:
			return nil, fmt.Errorf("keys[%d].agents: a reader key must list the agents it may read", i)
		case k.Role != RoleReader && len(k.Agents) > 0:
			return nil, fmt.Errorf("keys[%d].agents: only reader keys are limited to agents", i)
		}
		h, err := hex.DecodeString(k.SHA256)
		if err != nil || len(h) != sha256.Size {
			return nil, fmt.Errorf("keys[%d].sha256: must be the 64 hex digits of the key's SHA-256", i)
		}
		if other, dup := hashes[strings.ToLower(k.SHA256)]; dup {
			return nil, fmt.Errorf("keys[%d].sha256: the same key as %q: one key, one role", i, other)
		}
		hashes[strings.ToLower(k.SHA256)] = k.ID
		seen[k.ID] = true
		s.keys = append(s.keys, k)
		s.hashes = append(s.hashes, [sha256.Size]byte(h))
	}
	return s, nil
}

// Parse reads a key file.
func Parse(r io.Reader) (*Set, error) {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	var f File
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("api key file: %w", err)
	}
	return NewSet(f.Keys)
}

// Load reads the key file at path.
func Load(path string) (*Set, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	s, err := Parse(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Len returns the number of keys.
func (s *Set) Len() int { return len(s.keys) }

// Lookup returns the key whose hash matches raw. Every stored hash is
// compared, in constant time, so timing reveals nothing about which matched.
func (s *Set) Lookup(raw string) (Key, bool) {
	if s == nil || raw == "" {
		return Key{}, false
	}
	sum := sha256.Sum256([]byte(raw))
	found := -1
	for i := range s.hashes {
		if subtle.ConstantTimeCompare(sum[:], s.hashes[i][:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Key{}, false
	}
	return s.keys[found], true
}

// KeyPrefix starts every raw key Stipend makes, so leaked keys are easy to
// recognise in logs and secret scanners.
const KeyPrefix = "stp_"

// Generate makes a new raw key for role (and, for readers, agents) and the
// entry to put in the key file. The raw key is shown once and never stored.
func Generate(id string, role Role, agents []string) (raw string, k Key, err error) {
	if !role.Valid() {
		return "", Key{}, fmt.Errorf("role %q is not one of host, billing, admin, reader", role)
	}
	if (role == RoleReader) != (len(agents) > 0) {
		return "", Key{}, errors.New("reader keys, and only they, list agents")
	}
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", Key{}, err
	}
	raw = KeyPrefix + string(role) + "_" + hex.EncodeToString(b[:])
	sum := sha256.Sum256([]byte(raw))
	if id == "" {
		// From the key's hash, not its secret: the ID is logged with every
		// request.
		id = string(role) + "-" + hex.EncodeToString(sum[:3])
	}
	return raw, Key{ID: id, Role: role, SHA256: hex.EncodeToString(sum[:]), Agents: agents}, nil
}

// FromBearer extracts the key from an "Authorization: Bearer <key>" value.
func FromBearer(header string) (string, bool) {
	const p = "Bearer "
	if len(header) <= len(p) || !strings.EqualFold(header[:len(p)], p) {
		return "", false
	}
	return strings.TrimSpace(header[len(p):]), true
}
