package firestore

import (
	"fmt"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
)

// A membership (entitlement/wallet.go) lives in the top-level collection
// "memberships" as {wallet}~{member} (each part docID's form, which never
// holds "~", so two pairs never share a document), with both IDs as fields
// for the two lists: a wallet's members by memberId, an agent's wallets by
// walletId (queries.go). One document per wallet × member, touched only by
// that member's charges and by the admin: the member's period spend is not
// a second hot document shared by all members.

// colMemberships is the collection of every wallet's memberships.
const colMemberships = "memberships"

func (s *Store) membershipRef(walletID, memberID string) *firestore.DocumentRef {
	return s.col(colMemberships).Doc(docID(walletID) + "~" + docID(memberID))
}

// membershipFields: the caps are stored as an entitlement's limits are,
// but their spend limit may bound money and units at once, so both pairs
// of counters are stored when their most is.
func membershipFields(m *entitlement.Membership) []field {
	return []field{
		str("walletId", &m.WalletID), str("memberId", &m.MemberID), str("order", &m.Order),
		opt(nested(capsFields)("caps", &m.Caps)),
		instant("createdAt", &m.CreatedAt), instant("updatedAt", &m.UpdatedAt),
		opt(array("holds", &m.Holds, func(h *entitlement.MemberHold) []field {
			return []field{str("id", &h.ID), opt(integer("cents", &h.Cents)), opt(integer("units", &h.Units)),
				instant("expiresAt", &h.ExpiresAt)}
		})),
	}
}

func capsFields(l *entitlement.Limits) []field {
	spend := func(s *entitlement.SpendLimit) []field {
		money := func() bool { return !s.Max.IsZero() }
		units := func() bool { return s.MaxUnits != 0 }
		return []field{str("period", &s.Period), instant("resetAt", &s.ResetAt), instant("anchor", &s.Anchor),
			when(amount("max", &s.Max), money), when(amount("spent", &s.Spent), money),
			when(integer("maxUnits", &s.MaxUnits), units), when(integer("spentUnits", &s.SpentUnits), units)}
	}
	return []field{ptr("maxPerCall", &l.MaxPerCall, amount), ptr("maxUnitsPerCall", &l.MaxUnitsPerCall, integer),
		when(nested(spend)("spend", &l.Spend), func() bool { return l.Spend.Period != "" })}
}

func membershipDoc(m *entitlement.Membership) map[string]any { return encode(membershipFields(m)) }

// membershipFrom decodes a membership strictly: a known order and period,
// counters and reservations never negative.
func membershipFrom(snap *firestore.DocumentSnapshot) (entitlement.Membership, error) {
	var m entitlement.Membership
	f := read(snap)
	f.decode(membershipFields(&m))
	s := &m.Caps.Spend
	switch {
	case !m.Order.Valid():
		f.corrupt("order", "unknown order %q", m.Order)
	case f.has("caps.spend") && !s.Period.Valid():
		f.corrupt("caps.spend.period", "unknown period %q", s.Period)
	case s.Spent.Cents < 0 || s.SpentUnits < 0:
		f.corrupt("caps.spend.spent", "negative spend %d cents, %d units", s.Spent.Cents, s.SpentUnits)
	}
	for i, h := range m.Holds {
		if h.Cents < 0 || h.Units < 0 {
			f.corrupt(fmt.Sprintf("holds[%d].cents", i), "a negative reservation")
		}
	}
	return m, f.err
}
