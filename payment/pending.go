package payment

import "time"

// Pending returns p as a new pending payment created at now: every field
// of its lifecycle is reset, whatever the caller set.
func (p Payment) Pending(now time.Time) Payment {
	p.Status, p.CreatedAt, p.UpdatedAt = StatusPending, now, now
	p.SucceededAt, p.FailedAt, p.RefundedAt = nil, nil, nil
	p.FailureReason, p.ReceiptID, p.RefundReceiptID, p.EntitlementIDs = "", "", "", nil
	return p
}
