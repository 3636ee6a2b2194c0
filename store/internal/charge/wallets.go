package charge

import (
	"cmp"
	"slices"

	"github.com/stipend-mcp/stipend/entitlement"
)

// The candidates of a wallet member's call (store/wallet.go): the member's
// own active entitlements and those of each wallet it belongs to, in the
// order its memberships say.

// Pool is what a call of an agent may be charged to
// (Charger.ActiveEntitlements): the active entitlements of the agent and of
// its wallets (AgentID tells them apart), and the agent's memberships.
type Pool struct {
	Entitlements []entitlement.Entitlement
	Members      []entitlement.Membership
}

// members are an agent's memberships.
type members []entitlement.Membership

// of returns the membership in walletID, or nil.
func (ms members) of(walletID string) *entitlement.Membership {
	for i := range ms {
		if ms[i].WalletID == walletID {
			return &ms[i]
		}
	}
	return nil
}

// Order returns the entitlements of p worth trying for a call of agentID
// to service and tool, in the order to try them (see the package-level
// Order), and the scope_mismatch denials of the others.
func (p *Pool) Order(agentID, service, tool string) ([]*entitlement.Entitlement, []entitlement.Denial) {
	own := make([]*entitlement.Entitlement, 0, len(p.Entitlements))
	var byWallet map[string][]*entitlement.Entitlement
	for i := range p.Entitlements {
		e := &p.Entitlements[i]
		if e.AgentID == agentID {
			own = append(own, e)
			continue
		}
		if byWallet == nil {
			byWallet = map[string][]*entitlement.Entitlement{}
		}
		byWallet[e.AgentID] = append(byWallet[e.AgentID], e)
	}
	wallets := make([]Wallet, len(p.Members))
	for i := range p.Members {
		wallets[i] = Wallet{Member: &p.Members[i], Active: byWallet[p.Members[i].WalletID]}
	}
	return Order(own[:0:0], own, wallets, service, tool)
}

// Wallet is one wallet a caller belongs to: its membership and the
// wallet's active entitlements.
type Wallet struct {
	Member *entitlement.Membership
	Active []*entitlement.Entitlement
}

// Order appends to dst the candidates of a call to service and tool by an
// agent whose own active entitlements are own and whose wallets are
// wallets, in the order they are tried: the wallets whose membership says
// wallet_first (oldest membership first, then by wallet ID), the agent's
// own, then the wallets whose membership says own_first (in the same
// order); each group in entitlement.Candidates order. It returns the
// scope_mismatch denials of those out of scope. It sorts wallets. Without
// wallets it is entitlement.Candidates.
func Order(dst, own []*entitlement.Entitlement, wallets []Wallet, service, tool string) ([]*entitlement.Entitlement, []entitlement.Denial) {
	if len(wallets) == 0 {
		return entitlement.Candidates(dst, own, service, tool)
	}
	slices.SortFunc(wallets, func(a, b Wallet) int {
		return cmp.Or(a.Member.CreatedAt.Compare(b.Member.CreatedAt), cmp.Compare(a.Member.WalletID, b.Member.WalletID))
	})
	var denials []entitlement.Denial
	add := func(es []*entitlement.Entitlement) {
		group, d := entitlement.Candidates(nil, es, service, tool)
		dst, denials = append(dst, group...), append(denials, d...)
	}
	for _, w := range wallets {
		if w.Member.Order == entitlement.OrderWalletFirst {
			add(w.Active)
		}
	}
	add(own)
	for _, w := range wallets {
		if w.Member.Order != entitlement.OrderWalletFirst {
			add(w.Active)
		}
	}
	return dst, denials
}
