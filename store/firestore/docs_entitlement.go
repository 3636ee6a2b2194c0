package firestore

import (
	"fmt"
	"slices"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
)

// The documents of accounts, entitlements (their spend controls "limits",
// low-balance alerts "alerts", and open holds "holds") and consumptions.

func accountFields(a *entitlement.Account) []field {
	return []field{
		str("agentId", &a.AgentID), opt(str("kind", &a.Kind)), opt(str("displayName", &a.DisplayName)), opt(strMap("metadata", &a.Metadata)),
		instant("createdAt", &a.CreatedAt), instant("updatedAt", &a.UpdatedAt),
		opt(nested(accountLimitFields)("limits", &a.Limits)),
	}
}

// accountLimitFields: each element of maxPerCall is a map {amount}.
func accountLimitFields(l *entitlement.AccountLimits) []field {
	return []field{
		opt(array("maxPerCall", &l.MaxPerCall, func(m *money.Money) []field { return []field{amount("amount", m)} })),
		ptr("maxUnitsPerCall", &l.MaxUnitsPerCall, integer),
	}
}

func accountDoc(a *entitlement.Account) map[string]any { return encode(accountFields(a)) }

// accountFrom decodes an account strictly: a known kind (absent: an
// agent's, as every account stored before wallets).
func accountFrom(snap *firestore.DocumentSnapshot) (entitlement.Account, error) {
	var a entitlement.Account
	f := read(snap)
	f.decode(accountFields(&a))
	if !a.Kind.Valid() {
		f.corrupt("kind", "unknown kind %q", a.Kind)
	}
	return a, f.err
}

func scopeFields(s *entitlement.Scope) []field {
	return []field{str("service", &s.Service), opt(strs("tools", &s.Tools))}
}

func entitlementFields(e *entitlement.Entitlement) []field {
	return []field{
		str("id", &e.ID), str("agentId", &e.AgentID), str("type", &e.Type), nested(scopeFields)("scope", &e.Scope),
		str("status", &e.Status), instant("createdAt", &e.CreatedAt),
		ptr("expiresAt", &e.ExpiresAt, instant), ptr("revokedAt", &e.RevokedAt, instant),
		opt(str("paymentId", &e.PaymentID)), opt(strMap("metadata", &e.Metadata)),
	}
}

// kindFields are the fields that depend on e's type: its balance, quota or
// subscription, and its controls. An alert is triggered exactly when it
// stores triggeredAt.
func kindFields(e *entitlement.Entitlement) []field {
	var fs []field
	switch e.Type {
	case entitlement.TypeCredits:
		fs = append(fs, nested(func(c *entitlement.Credits) []field {
			return []field{amount("balance", &c.Balance), amount("granted", &c.Granted)}
		})("credits", &e.Credits))
	case entitlement.TypeQuota:
		fs = append(fs, nested(func(q *entitlement.Quota) []field {
			return []field{integer("limit", &q.Limit), str("period", &q.Period), integer("remaining", &q.Remaining),
				instant("resetAt", &q.ResetAt), instant("anchor", &q.Anchor)}
		})("quota", &e.Quota))
	case entitlement.TypeSubscription:
		fs = append(fs, nested(func(s *entitlement.Subscription) []field {
			return []field{instant("validFrom", &s.ValidFrom), ptr("validUntil", &s.ValidUntil, instant)}
		})("subscription", &e.Subscription))
	}
	return append(fs, opt(nested(limitFields(e.Type))("limits", &e.Limits)),
		opt(array("alerts", &e.Alerts, func(a *entitlement.Alert) []field {
			return []field{ptr("amount", &a.Amount, amount), ptr("percent", &a.Percent, integer),
				ptr("units", &a.Units, integer), ptr("triggeredAt", &a.TriggeredAt, instant)}
		})),
		opt(array("holds", &e.Holds, func(o *entitlement.OpenHold) []field {
			return []field{str("id", &o.ID), integer("amount", &o.Amount), instant("expiresAt", &o.ExpiresAt),
				opt(str("memberId", &o.MemberID))}
		})))
}

// limitFields: a spend limit ("spend", stored when it has a period) is in
// money on credits and in units otherwise.
func limitFields(typ entitlement.Type) func(*entitlement.Limits) []field {
	spend := func(s *entitlement.SpendLimit) []field {
		fs := []field{str("period", &s.Period), instant("resetAt", &s.ResetAt), instant("anchor", &s.Anchor)}
		if typ == entitlement.TypeCredits {
			return append(fs, amount("max", &s.Max), amount("spent", &s.Spent))
		}
		return append(fs, integer("maxUnits", &s.MaxUnits), integer("spentUnits", &s.SpentUnits))
	}
	return func(l *entitlement.Limits) []field {
		return []field{ptr("maxPerCall", &l.MaxPerCall, amount), ptr("maxUnitsPerCall", &l.MaxUnitsPerCall, integer),
			when(nested(spend)("spend", &l.Spend), func() bool { return l.Spend.Period != "" })}
	}
}

// entitlementDoc also stores, for the sweep's query (ExpireHolds), the
// earliest expiry of the open holds (holdsExpireAt), and the open-lease
// registry (docs_lease.go).
func entitlementDoc(e *entitlement.Entitlement) map[string]any {
	d := encode(append(entitlementFields(e), kindFields(e)...))
	if len(e.Holds) > 0 {
		d["holdsExpireAt"] = stamp(slices.MinFunc(e.Holds, func(a, b entitlement.OpenHold) int {
			return a.ExpiresAt.Compare(b.ExpiresAt)
		}).ExpiresAt)
	}
	putLeases(d, e.Leases)
	return d
}

func entitlementFrom(snap *firestore.DocumentSnapshot) (entitlement.Entitlement, error) {
	var e entitlement.Entitlement
	f := read(snap)
	f.decode(entitlementFields(&e))
	f.decode(kindFields(&e))
	switch {
	case !e.Status.Valid():
		f.corrupt("status", "unknown status %q", e.Status)
	case e.Type == entitlement.TypeCredits && e.Credits.Balance.Cents < 0:
		f.corrupt("credits.balance.cents", "negative balance %d", e.Credits.Balance.Cents)
	case e.Type == entitlement.TypeQuota && !e.Quota.Period.Valid():
		f.corrupt("quota.period", "unknown period %q", e.Quota.Period)
	case e.Type != entitlement.TypeCredits && e.Type != entitlement.TypeQuota && e.Type != entitlement.TypeSubscription:
		f.corrupt("type", "unknown type %q", e.Type)
	case f.has("limits.spend") && !e.Limits.Spend.Period.Valid():
		f.corrupt("limits.spend.period", "unknown period %q", e.Limits.Spend.Period)
	}
	for i := range e.Alerts {
		a := &e.Alerts[i]
		if a.Amount == nil && a.Percent == nil && a.Units == nil {
			f.corrupt(fmt.Sprintf("alerts[%d].amount", i), "absent, as are percent and units: an alert with no threshold")
		}
		a.Triggered = a.TriggeredAt != nil
	}
	for i, o := range e.Holds {
		if o.Amount < 0 {
			f.corrupt(fmt.Sprintf("holds[%d].amount", i), "negative amount %d", o.Amount)
		}
	}
	leasesFrom(f, &e)
	return e, f.err
}

// keyFields are the fields a consumption and a hold of one idempotency key
// share (docs_hold.go). walletId, on a member's charge to a wallet's
// entitlement, is what the wallet's lists and usage query (queries.go).
func keyFields(id, agent, ent *string, typ *entitlement.Type, wallet, service, tool, key, fingerprint *string) []field {
	return []field{str("id", id), str("agentId", agent), str("entitlementId", ent), str("entitlementType", typ),
		opt(str("walletId", wallet)), str("service", service), str("tool", tool), str("idempotencyKey", key),
		str("fingerprint", fingerprint)}
}

func consumptionFields(c *entitlement.Consumption) []field {
	return append(keyFields(&c.ID, &c.AgentID, &c.EntitlementID, &c.EntitlementType, &c.WalletID, &c.Service, &c.Tool, &c.IdempotencyKey, &c.Fingerprint),
		opt(amount("cost", &c.Cost)), integer("units", &c.Units), instant("occurredAt", &c.OccurredAt),
		opt(amount("balanceAfter", &c.BalanceAfter)), ptr("remainingAfter", &c.RemainingAfter, integer),
		opt(str("holdId", &c.HoldID)), ptr("refund", &c.Refund, nested(func(r *entitlement.Refund) []field {
			return append(chargeFields(&r.Charge), instant("refundedAt", &r.RefundedAt))
		})))
}

func chargeFields(c *entitlement.Charge) []field {
	return []field{opt(amount("cost", &c.Cost)), integer("units", &c.Units)}
}

var consumptionFrom = decoder(consumptionFields)
