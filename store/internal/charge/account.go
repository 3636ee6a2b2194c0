package charge

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/field"
	"github.com/stipend-mcp/stipend/store"
)

// accountRead is the read of the caller's account (its account-wide limits
// and its kind), started beside the key lookup so a call waits for the
// slower of the two reads, not for both in turn. The account is never
// written by a charge, so reading it contends with nothing.
type accountRead chan callerAccount

type callerAccount struct {
	a   entitlement.Account
	err error
}

// readAccount starts reading the account of agentID.
func readAccount(ctx context.Context, c Charger, agentID string) accountRead {
	ch := make(accountRead, 1) // the reader may never wait: a replay answers without it
	go func() {
		a, err := c.CallerAccount(ctx, agentID)
		ch <- callerAccount{a, err}
	}()
	return ch
}

// refuse waits for the read and answers the denial its limits give req
// (one max_per_call_exceeded denial without an entitlement ID), or nil. A
// wallet never calls: its call is Invalid, naming agentId.
func (a accountRead) refuse(req *entitlement.ConsumeRequest) ([]entitlement.Denial, error) {
	r := <-a
	if r.err != nil {
		return nil, r.err
	}
	return Refuse(&r.a, req)
}

// Refuse answers what the caller's account a says of req before any
// entitlement is tried: Invalid (agentId) when a is a wallet's, one
// max_per_call_exceeded denial when its limits refuse req, or nothing.
func Refuse(a *entitlement.Account, req *entitlement.ConsumeRequest) ([]entitlement.Denial, error) {
	if a.IsWallet() {
		return nil, store.Wrap(store.CodeInvalid, &field.Error{Field: "agentId", Reason: "is a wallet: a wallet's members call, the wallet never does"}, "charge request")
	}
	if reason := a.Limits.Check(req); reason != "" {
		return []entitlement.Denial{{Reason: reason}}, nil
	}
	return nil, nil
}

// AccountDenied is the Denied answer of a call the account's limits refuse.
func AccountDenied(d []entitlement.Denial) store.ConsumeResult {
	return store.ConsumeResult{Outcome: store.Denied, Denials: d}
}
