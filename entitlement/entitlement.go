// Package entitlement holds what an agent may spend and the pure rules for
// spending it: scope matching, lazy quota reset, expiry, the consume rule and
// the order in which candidates are tried. Nothing here does I/O; both stores
// apply these rules inside their transactions.
package entitlement

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/money"
)

// Type is the kind of an entitlement.
type Type string

// The entitlement kinds.
const (
	TypeCredits      Type = "credits"
	TypeQuota        Type = "quota"
	TypeSubscription Type = "subscription"
)

// Valid reports whether t is a known kind.
func (t Type) Valid() bool {
	return t == TypeCredits || t == TypeQuota || t == TypeSubscription
}

// Status is the lifecycle state of an entitlement.
type Status string

// The entitlement statuses.
const (
	StatusActive  Status = "active"
	StatusRevoked Status = "revoked"
)

// Valid reports whether s is a known status.
func (s Status) Valid() bool { return s == StatusActive || s == StatusRevoked }

// MaxMetadataEntries and MaxMetadataBytes bound an entitlement's or account's
// metadata, so documents stay far below Firestore's 1 MiB limit.
const (
	MaxMetadataEntries = 32
	MaxMetadataBytes   = 4096
)

// Account is an agent's or a wallet's account. Its ID is the agent ID (a
// wallet's ID is in the same namespace).
type Account struct {
	AgentID string `json:"agentId"`
	// Kind says whether the account is an agent's or a wallet's
	// (wallet.go); it is set when the account is created and never changes.
	Kind        AccountKind       `json:"kind,omitempty"`
	DisplayName string            `json:"displayName,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	// Limits are the account-wide spend controls (account_limits.go).
	Limits    AccountLimits `json:"limits,omitzero"`
	CreatedAt time.Time     `json:"createdAt"`
	UpdatedAt time.Time     `json:"updatedAt"`
}

// Entitlement is one thing an agent may consume from. Exactly one of Credits,
// Quota and Subscription is set, matching Type.
type Entitlement struct {
	ID           string            `json:"id"`
	AgentID      string            `json:"agentId"`
	Type         Type              `json:"type"`
	Scope        Scope             `json:"scope"`
	Status       Status            `json:"status"`
	CreatedAt    time.Time         `json:"createdAt"`
	ExpiresAt    *time.Time        `json:"expiresAt,omitempty"`
	RevokedAt    *time.Time        `json:"revokedAt,omitempty"`
	PaymentID    string            `json:"paymentId,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Credits      Credits           `json:"credits,omitzero"`
	Quota        Quota             `json:"quota,omitzero"`
	Subscription Subscription      `json:"subscription,omitzero"`
	// Limits are the spend controls (limits.go); Alerts the low-balance
	// thresholds (alerts.go).
	Limits Limits  `json:"limits,omitzero"`
	Alerts []Alert `json:"alerts,omitempty"`
	// Holds are the open holds on e: what each reserves and until when.
	// Stores keep them with the entitlement, so every spending decision sees
	// them in the same transaction; only the rules in hold.go change them.
	Holds []OpenHold `json:"-"`
	// Leases are the open leases on e (lease.go): what each may spend.
	Leases []OpenLease `json:"-"`
}

// Credits is a prepaid balance. Granted is what was put in; Balance is what is
// left; Held is the part of Balance that open holds reserve (what can be
// spent is Balance − Held). Held is a view of Entitlement.Holds that Refresh
// sets; stores need not keep it.
type Credits struct {
	Balance money.Money `json:"balance"`
	Granted money.Money `json:"granted"`
	Held    money.Money `json:"held"`
}

// MarshalJSON shows Held (and a Granted left unset) in the balance's
// currency, also on a value that Refresh has not set: a zero amount has no
// currency of its own.
func (c Credits) MarshalJSON() ([]byte, error) {
	type plain Credits
	p := plain(c)
	p.Held.Currency = c.Balance.Currency
	if p.Granted.IsZero() {
		p.Granted.Currency = c.Balance.Currency
	}
	return json.Marshal(p)
}

// Quota allows Limit units per Period. Remaining resets to Limit lazily, inside
// the consuming transaction, once now ≥ ResetAt. Period boundaries are counted
// from Anchor (the start of the first period), so a monthly quota anchored on
// the 31st resets on the last day of shorter months and on the 31st again after.
type Quota struct {
	Limit     int64     `json:"limit"`
	Period    Period    `json:"period"`
	Remaining int64     `json:"remaining"`
	ResetAt   time.Time `json:"resetAt"`
	Anchor    time.Time `json:"anchor"`
	// Held is the part of Remaining that open holds reserve, a view of
	// Entitlement.Holds that Refresh sets.
	Held int64 `json:"held"`
}

// Subscription allows unlimited calls from ValidFrom until ValidUntil
// (excluded); a nil ValidUntil is a window with no end. Every instant given
// is honoured as given: there is no zero-time sentinel.
type Subscription struct {
	ValidFrom  time.Time  `json:"validFrom"`
	ValidUntil *time.Time `json:"validUntil,omitempty"`
}

// EffectiveExpiry is the instant from which e can no longer be used: the
// earlier of ExpiresAt and, for a subscription, ValidUntil. ok is false when
// e has neither, and never expires. Any instant set counts, the zero time
// (0001-01-01T00:00:00Z) included.
func (e *Entitlement) EffectiveExpiry() (t time.Time, ok bool) {
	if e.ExpiresAt != nil {
		t, ok = *e.ExpiresAt, true
	}
	if u := e.Subscription.ValidUntil; e.Type == TypeSubscription && u != nil && (!ok || u.Before(t)) {
		t, ok = *u, true
	}
	return t, ok
}

// Expired reports whether e is past its expiry (or, for a subscription,
// outside its window) at now. An expiry exactly at now counts as expired.
func (e *Entitlement) Expired(now time.Time) bool {
	if exp, ok := e.EffectiveExpiry(); ok && !now.Before(exp) {
		return true
	}
	return e.Type == TypeSubscription && now.Before(e.Subscription.ValidFrom)
}

// Clone returns a copy of e that shares no slice, map or pointer with it.
func (e *Entitlement) Clone() Entitlement {
	c := *e
	c.Scope.Tools = slices.Clone(e.Scope.Tools)
	c.Metadata = maps.Clone(e.Metadata)
	c.ExpiresAt = ClonePtr(e.ExpiresAt)
	c.RevokedAt = ClonePtr(e.RevokedAt)
	c.Subscription.ValidUntil = ClonePtr(e.Subscription.ValidUntil)
	c.Holds = slices.Clone(e.Holds)
	cloneControls(&c, e)
	c.Leases = slices.Clone(e.Leases)
	return c
}
