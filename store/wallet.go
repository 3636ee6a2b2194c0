package store

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
)

// MemberUpdate is a change of a membership: a nil field leaves that part as
// it is. Caps replace the old caps whole (entitlement.Membership.Apply has
// the rules: the member's spend of the period is kept while the period stays
// the same).
type MemberUpdate struct {
	Order *entitlement.Order
	Caps  *entitlement.Limits
}

// Wallets are the members of shared wallets (entitlement/wallet.go): a
// wallet is an account of kind wallet (UpsertAccount creates one; its kind
// never changes), which holds entitlements as an agent's account does and
// never calls; its members' calls may be charged to it.
//
// What the charge path does with memberships (CheckAndConsume, Check,
// Authorize): the candidates of a call by agent A are A's own active
// entitlements and those of every wallet A is a member of, in this order:
// the wallets whose membership says wallet_first (oldest membership first),
// then A's own, then the wallets whose membership says own_first; within
// each group entitlement.SortCandidates order. A call naming a wallet's
// entitlement (EntitlementID) is allowed for a member. The atomic step on a
// wallet's entitlement reads the membership in the same transaction: a
// caller that is not (or no longer) a member is refused with not_found; the
// caps (entitlement.Membership.Check) refuse with member_limit_reached,
// naming the member and the limit; a charge or hold counts toward the caps
// in the same step, and a charge that takes the period's spend to its most
// writes wallet.member_limit_reached. The consumption or hold records the
// caller as AgentID and the wallet as WalletID. Capture, release, refund
// and expiry of what a member charged or held work after its removal (the
// money was reserved or charged) and then change no counter. A call whose
// agent is a wallet is Invalid (field agentId).
type Wallets interface {
	// AddMember adds m.MemberID to the wallet m.WalletID with m's order
	// (default own_first) and caps (their counters are ignored), creating
	// the member's account if absent, and writes wallet.member_added, in
	// ONE atomic step; it returns the stored membership. Errors: Invalid (a
	// *field.Error inside naming the field) for bad names, order or caps,
	// a member equal to the wallet or a member that is a wallet (memberId);
	// NotFound (walletId) when the wallet is absent or is not a wallet;
	// Conflict when the membership exists. Nothing changes on error.
	AddMember(ctx context.Context, m entitlement.Membership) (entitlement.Membership, error)
	// UpdateMember applies u to the membership and writes
	// wallet.member_updated, in ONE atomic step with the member's charges,
	// and returns it. ErrNotFound if absent; Invalid (a *field.Error
	// inside) for a bad order or caps, which changes nothing.
	UpdateMember(ctx context.Context, walletID, memberID string, u MemberUpdate) (entitlement.Membership, error)
	// RemoveMember deletes the membership and writes wallet.member_removed,
	// in ONE atomic step, and returns it as it was. From then on the
	// member's calls are refused on the wallet's entitlements. ErrNotFound
	// if absent.
	RemoveMember(ctx context.Context, walletID, memberID string) (entitlement.Membership, error)
	// GetMember returns the membership (its spend of the period shown as of
	// now), or ErrNotFound.
	GetMember(ctx context.Context, walletID, memberID string) (entitlement.Membership, error)
	// ListMembers lists the memberships of a wallet, by MemberID.
	ListMembers(ctx context.Context, walletID string, p Page) (items []entitlement.Membership, nextCursor string, err error)
	// ListWallets lists the memberships of an agent, by WalletID.
	ListWallets(ctx context.Context, memberID string, p Page) (items []entitlement.Membership, nextCursor string, err error)
}
