package charge

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/store"
)

// accountRead is the read of an agent's account-wide limits, started
// beside the key lookup so a call waits for the slower of the two reads, not
// for both in turn. The account is never written by a charge, so reading it
// contends with nothing.
type accountRead chan accountLimits

type accountLimits struct {
	l   entitlement.AccountLimits
	err error
}

// readAccount starts reading the account limits of agentID.
func readAccount(ctx context.Context, c Charger, agentID string) accountRead {
	ch := make(accountRead, 1) // the reader may never wait: a replay answers without it
	go func() {
		l, err := c.AccountLimits(ctx, agentID)
		ch <- accountLimits{l, err}
	}()
	return ch
}

// refuse waits for the read and answers the denial its limits give req
// (one max_per_call_exceeded denial without an entitlement ID), or nil.
func (a accountRead) refuse(req *entitlement.ConsumeRequest) ([]entitlement.Denial, error) {
	r := <-a
	if r.err != nil {
		return nil, r.err
	}
	if reason := r.l.Check(req); reason != "" {
		return []entitlement.Denial{{Reason: reason}}, nil
	}
	return nil, nil
}

// AccountDenied is the Denied answer of a call the account's limits refuse.
func AccountDenied(d []entitlement.Denial) store.ConsumeResult {
	return store.ConsumeResult{Outcome: store.Denied, Denials: d}
}
