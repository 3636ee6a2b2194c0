package store

import (
	"context"
	"time"
)

// Claim is one instance's hold on a background job shared by every
// instance (the Stripe reconciliation sweep): Owner holds Name until Until.
type Claim struct {
	Name  string
	Owner string
	Until time.Time
}

// Claimer takes turns at background jobs between instances, so a job that
// every instance runs on a timer is done by one of them per turn.
type Claimer interface {
	// ClaimJob gives owner the job name until until and reports true when
	// no other owner holds it now (never claimed, or its claim ended by
	// the store's clock), or owner holds it already (a renewal); otherwise
	// it changes nothing and reports false. Of concurrent claims of one
	// free job, exactly one wins. A claim is about sharing work, never
	// about safety: what the job does must stay correct when two
	// instances run it at once (clocks drift).
	ClaimJob(ctx context.Context, name, owner string, until time.Time) (bool, error)
}
