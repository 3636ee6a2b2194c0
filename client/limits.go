package client

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// Change is one member of an EntitlementPatch or Limits: To sets it to a
// value, Remove removes it (sent as null). A nil *Change leaves the member
// as it is.
type Change[T any] struct {
	v      T
	remove bool
}

// To is a Change that sets a member to v.
func To[T any](v T) *Change[T] { return &Change[T]{v: v} }

// Remove is a Change that removes a member.
func Remove[T any]() *Change[T] { return &Change[T]{remove: true} }

// MarshalJSON sends the value, or null for a removal.
func (c Change[T]) MarshalJSON() ([]byte, error) {
	if c.remove {
		return []byte("null"), nil
	}
	return json.Marshal(c.v)
}

// Limits are the spend controls a grant or a patch sets, in the
// entitlement's own terms: MaxPerCall (money of its currency) for credits,
// MaxUnitsPerCall for a quota; a SpendLimit per period for either.
type Limits struct {
	MaxPerCall      *Change[money.Money] `json:"maxPerCall,omitempty"`
	MaxUnitsPerCall *Change[int64]       `json:"maxUnitsPerCall,omitempty"`
	SpendLimit      *Change[SpendLimit]  `json:"spendLimit,omitempty"`
}

// SpendLimit is the most an entitlement pays per Period: Max for credits,
// MaxUnits for a quota.
type SpendLimit struct {
	Period   entitlement.Period `json:"period"`
	Max      *money.Money       `json:"max,omitempty"`
	MaxUnits *int64             `json:"maxUnits,omitempty"`
}

// Threshold is a low-balance alert: exactly one of Amount (credits),
// Percent (of what was granted) and Units (quota, units left).
type Threshold struct {
	Amount  *money.Money `json:"amount,omitempty"`
	Percent *int64       `json:"percent,omitempty"`
	Units   *int64       `json:"units,omitempty"`
}

// EntitlementPatch is the body of PATCH /v1/entitlements/{id}: what an
// admin may change once an entitlement is granted. Nil members stay as they
// are; Alerts replaces every alert.
type EntitlementPatch struct {
	Limits    *Change[Limits]            `json:"limits,omitempty"`
	Alerts    *Change[[]Threshold]       `json:"alerts,omitempty"`
	Metadata  *Change[map[string]string] `json:"metadata,omitempty"`
	ExpiresAt *Change[time.Time]         `json:"expiresAt,omitempty"`
}

// UpdateEntitlement changes an entitlement's spend controls, alerts,
// metadata or expiry and returns it as changed. Applying a patch twice
// leaves it as once, so the call is retried like a read. Role: admin.
func (c *Client) UpdateEntitlement(ctx context.Context, id string, p EntitlementPatch) (*entitlement.Entitlement, error) {
	return fetch[entitlement.Entitlement](ctx, c, call{method: http.MethodPatch, path: "/v1/entitlements/" + seg(id), body: p, retry: true})
}

// SetAccountLimits replaces the account-wide limits of an agent's account
// (creating the account if absent) and returns the account; zero limits
// remove them. It is idempotent. Role: admin.
func (c *Client) SetAccountLimits(ctx context.Context, agentID string, l entitlement.AccountLimits) (*entitlement.Account, error) {
	path := "/v1/accounts/" + seg(agentID) + "/limits"
	return fetch[entitlement.Account](ctx, c, call{method: http.MethodPut, path: path, body: l, retry: true})
}
