package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// paymentColumns are the columns scanPayment reads, in its order.
const paymentColumns = `id, agent_id, amount_cents, amount_currency, provider, provider_intent_id, description,
	grant_template, status, created_at, updated_at, succeeded_at, failed_at, failure_reason, refunded_at,
	receipt_id, refund_receipt_id, entitlement_ids, idempotency_key, fingerprint,
	checkout_session_id, checkout_url, checkout_expires_at, refunded_cents, disputed_at, dispute_reason, dispute_won_at`

// paymentStatuses are the statuses a stored payment may have.
var paymentStatuses = []payment.Status{payment.StatusPending, payment.StatusSucceeded, payment.StatusFailed, payment.StatusRefunded}

// scanPayment reads one row of paymentColumns strictly.
func scanPayment(rows pgx.Row) (payment.Payment, error) {
	var (
		p                           payment.Payment
		cents                       int64
		currency, provider, status  string
		grant                       []byte
		created, updated            *time.Time
		succeeded, failed, refunded *time.Time
		sessionID, checkoutURL      string
		checkoutExpires, disputed   *time.Time
		disputeWon                  *time.Time
		refundedCents               int64
	)
	err := rows.Scan(&p.ID, &p.AgentID, &cents, &currency, &provider, &p.ProviderIntentID, &p.Description,
		&grant, &status, &created, &updated, &succeeded, &failed, &p.FailureReason, &refunded,
		&p.ReceiptID, &p.RefundReceiptID, &p.EntitlementIDs, &p.IdempotencyKey, &p.Fingerprint,
		&sessionID, &checkoutURL, &checkoutExpires, &refundedCents, &disputed, &p.DisputeReason, &disputeWon)
	if err != nil {
		return payment.Payment{}, err
	}
	r := &row{table: "payments", id: p.ID}
	p.Amount = r.amount("amount_cents", cents, currency)
	p.Provider = payment.Provider(r.oneOf("provider", provider, payment.Provider(provider).Valid()))
	p.Status = payment.Status(r.oneOf("status", status, slices.Contains(paymentStatuses, payment.Status(status))))
	if err := strictJSON(grant, &p.Grant); err != nil || !p.Grant.Type.Valid() {
		r.corrupt("grant_template", "not a grant: %v", err)
	}
	p.Grant.ValidUntil, p.Grant.ExpiresAt = instantPtr(p.Grant.ValidUntil), instantPtr(p.Grant.ExpiresAt)
	p.CreatedAt, p.UpdatedAt = r.required("created_at", created), r.required("updated_at", updated)
	p.SucceededAt, p.FailedAt, p.RefundedAt = instantPtr(succeeded), instantPtr(failed), instantPtr(refunded)
	if len(p.EntitlementIDs) == 0 {
		p.EntitlementIDs = nil
	}
	if refundedCents != 0 {
		p.RefundedAmount = &money.Money{Cents: refundedCents, Currency: p.Amount.Currency}
	}
	p.DisputedAt, p.DisputeWonAt = instantPtr(disputed), instantPtr(disputeWon)
	if sessionID != "" {
		p.Checkout = &payment.Checkout{SessionID: sessionID, URL: checkoutURL, ExpiresAt: r.required("checkout_expires_at", checkoutExpires)}
	}
	return p, r.err
}

// receiptColumns are the columns scanReceipt reads, in its order.
const receiptColumns = `id, payload, jws`

// scanReceipt reads one row of receiptColumns strictly: the payload is the
// receipt's JSON, money decoded by its strict codec, and names the row's ID.
func scanReceipt(rows pgx.Row) (receipt.Signed, error) {
	var id string
	var payload []byte
	var out receipt.Signed
	if err := rows.Scan(&id, &payload, &out.JWS); err != nil {
		return receipt.Signed{}, err
	}
	r := &row{table: "receipts", id: id}
	if err := strictJSON(payload, &out.Receipt); err != nil {
		r.corrupt("payload", "not a receipt: %v", err)
	} else if out.ID != id {
		r.corrupt("payload", "names receipt %q", out.ID)
	}
	out.IssuedAt = out.IssuedAt.UTC()
	return out, r.err
}

// ListReceipts implements store.EntitlementStore.
func (s *Store) ListReceipts(ctx context.Context, agentID string, p store.Page) ([]receipt.Signed, string, error) {
	q := listQuery{
		name:  "receipts",
		from:  `SELECT ` + receiptColumns + ` FROM receipts WHERE agent_id = $1`,
		args:  []any{agentID},
		order: "issued_at",
		parts: []string{agentID},
	}
	return list(ctx, s.pool, q, p, scanReceipt, func(r *receipt.Signed) (time.Time, string) { return r.IssuedAt, r.ID })
}

// The payment changes are package ops', on this store's unit of work
// (unit.go): each locks the payment row first (and then its entitlements
// in ID order), so concurrent changes of one payment wait for each other.
