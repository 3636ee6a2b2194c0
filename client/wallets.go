package client

import (
	"context"
	"iter"
	"net/http"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// A shared wallet is an account of kind wallet (PutAccount with
// Kind: entitlement.KindWallet) whose entitlements, granted and paid for as
// an agent's are, its members (agents) spend, each within its own caps
// (docs/api.md, "Shared wallets"). A member's consumptions and holds on
// the wallet name it (WalletID); a refusal by a member's cap is a 402 whose
// denial says entitlement.ReasonMemberLimit with the member and the limit.

// Caps are a member's caps inside a wallet, as a request sets them: the
// most per call (MaxPerCall, money, for credits charges in its currency;
// MaxUnitsPerCall for quota charges) and per period (SpendLimit). They
// bound the member across all the wallet's entitlements.
type Caps struct {
	MaxPerCall      *money.Money `json:"maxPerCall,omitempty"`
	MaxUnitsPerCall *int64       `json:"maxUnitsPerCall,omitempty"`
	SpendLimit      *SpendLimit  `json:"spendLimit,omitempty"`
}

// MemberRequest is the body of AddMember: the agent, where the wallet
// comes among its entitlements (empty: entitlement.OrderOwnFirst), its caps
// (nil: none).
type MemberRequest struct {
	MemberID string            `json:"memberId"`
	Order    entitlement.Order `json:"order,omitempty"`
	Caps     *Caps             `json:"caps,omitempty"`
}

func (r MemberRequest) check() error { return checkAgent("memberId", r.MemberID) }

// MemberPatch is the body of UpdateMember: nil members stay as they are;
// Caps replace the member's caps whole (Remove[Caps]() removes them all),
// keeping what it spent in a period that stays the same.
type MemberPatch struct {
	Order *entitlement.Order `json:"order,omitempty"`
	Caps  *Change[Caps]      `json:"caps,omitempty"`
}

// AddMember adds an agent to a wallet (its account is made if absent) and
// returns the membership. idempotencyKey is sent as the Idempotency-Key
// header (the route requires one; without it the call is refused unsent)
// and makes the call safe to retry. A member already there is a 409
// (IsConflict); an unknown wallet, or an account that is no wallet, a 404.
// Role: admin.
func (c *Client) AddMember(ctx context.Context, walletID, idempotencyKey string, r MemberRequest) (*entitlement.Membership, error) {
	return fetch[entitlement.Membership](ctx, c, call{method: http.MethodPost, path: membersPath(walletID), body: r,
		idemKey: idempotencyKey, keyRequired: true, retry: true})
}

// GetMember returns a membership. Role: billing, admin, reader (the
// wallet).
func (c *Client) GetMember(ctx context.Context, walletID, memberID string) (*entitlement.Membership, error) {
	return fetch[entitlement.Membership](ctx, c, call{method: http.MethodGet, path: membersPath(walletID) + "/" + seg(memberID), retry: true})
}

// UpdateMember changes a member's order or caps and returns the
// membership as changed. Applying a patch twice leaves it as once, so the
// call is retried like a read. Role: admin.
func (c *Client) UpdateMember(ctx context.Context, walletID, memberID string, p MemberPatch) (*entitlement.Membership, error) {
	return fetch[entitlement.Membership](ctx, c, call{method: http.MethodPatch, path: membersPath(walletID) + "/" + seg(memberID), body: p, retry: true})
}

// RemoveMember removes a member from a wallet and returns the membership as
// it was: the member's calls stop spending the wallet at once. It is
// retried on network errors and 503, so IsNotFound means the member is
// gone, whether or not this call removed it. Role: admin.
func (c *Client) RemoveMember(ctx context.Context, walletID, memberID string) (*entitlement.Membership, error) {
	return fetch[entitlement.Membership](ctx, c, call{method: http.MethodDelete, path: membersPath(walletID) + "/" + seg(memberID), retry: true})
}

// ListMembers returns one page of a wallet's memberships, by member ID.
// Role: billing, admin, reader (the wallet).
func (c *Client) ListMembers(ctx context.Context, walletID string, p Page) (*List[entitlement.Membership], error) {
	return fetch[List[entitlement.Membership]](ctx, c, call{method: http.MethodGet, path: membersPath(walletID), query: p.values(), retry: true})
}

// AllMembers ranges over a wallet's memberships, as ListMembers pages them.
func (c *Client) AllMembers(ctx context.Context, walletID string) iter.Seq2[entitlement.Membership, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[entitlement.Membership], error) {
		return c.ListMembers(ctx, walletID, p)
	})
}

// WalletMembership is one wallet an agent belongs to: the membership, the
// wallet's balance (as Balance answers it for the wallet), and the room
// the member's spend limit in it leaves (nil without a spend limit).
type WalletMembership struct {
	entitlement.Membership
	Balance entitlement.Balance `json:"balance"`
	CapRoom *CapRoom            `json:"capRoom,omitempty"`
}

// CapRoom is what a member's spend limit in a wallet leaves it in the
// current period, less what its open holds reserve: Amount for a money
// limit, Units for a units limit, until ResetAt.
type CapRoom struct {
	Amount  *money.Money `json:"amount,omitempty"`
	Units   *int64       `json:"units,omitempty"`
	ResetAt time.Time    `json:"resetAt"`
}

// ListWallets returns one page of the wallets an agent belongs to, by
// wallet ID, each with what it can spend. Role: billing, admin, reader
// (the agent).
func (c *Client) ListWallets(ctx context.Context, agentID string, p Page) (*List[WalletMembership], error) {
	path := "/v1/accounts/" + seg(agentID) + "/wallets"
	return fetch[List[WalletMembership]](ctx, c, call{method: http.MethodGet, path: path, query: p.values(), retry: true})
}

// AllWallets ranges over the wallets an agent belongs to, as ListWallets
// pages them.
func (c *Client) AllWallets(ctx context.Context, agentID string) iter.Seq2[WalletMembership, error] {
	return all(ctx, func(ctx context.Context, p Page) (*List[WalletMembership], error) {
		return c.ListWallets(ctx, agentID, p)
	})
}

// membersPath is the path of a wallet's members.
func membersPath(walletID string) string { return "/v1/wallets/" + seg(walletID) + "/members" }
