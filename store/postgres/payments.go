package postgres

import (
	"context"
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
	p.Status = payment.Status(r.oneOf("status", status, validPaymentStatus(status)))
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

func validPaymentStatus(s string) bool {
	switch payment.Status(s) {
	case payment.StatusPending, payment.StatusSucceeded, payment.StatusFailed, payment.StatusRefunded:
		return true
	}
	return false
}

// insertPayment inserts the new pending payment p inside tx; if a
// concurrent transaction took its key, ID or intent, the unit starts over
// and reads what that one wrote.
func insertPayment(ctx context.Context, tx pgx.Tx, p *payment.Payment) error {
	grant, err := jsonArg(p.Grant)
	if err != nil {
		return err
	}
	var sessionID, checkoutURL string
	var checkoutExpires *time.Time
	if c := p.Checkout; c != nil {
		sessionID, checkoutURL, checkoutExpires = c.SessionID, c.URL, &c.ExpiresAt
	}
	tag, err := tx.Exec(ctx, `INSERT INTO payments (`+paymentColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, NULL, '', NULL, '', '', '{}', $12, $13, $14, $15, $16, 0, NULL, '', NULL)
		ON CONFLICT DO NOTHING`,
		p.ID, p.AgentID, p.Amount.Cents, p.Amount.Currency, string(p.Provider), p.ProviderIntentID, p.Description,
		grant, string(p.Status), p.CreatedAt, p.UpdatedAt, p.IdempotencyKey, p.Fingerprint, sessionID, checkoutURL, checkoutExpires)
	if err == nil && tag.RowsAffected() != 1 {
		return errRetry
	}
	return err
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

// insertReceipt stores a signed receipt inside tx.
func insertReceipt(ctx context.Context, tx pgx.Tx, r *receipt.Signed) error {
	payload, err := jsonArg(r.Receipt)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO receipts (id, agent_id, payment_id, issued_at, payload, jws)
		VALUES ($1, $2, $3, $4, $5, $6)`, r.ID, r.AgentID, r.PaymentID, r.IssuedAt, payload, r.JWS)
	return err
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

// updatePayment writes p's changing fields inside tx.
func updatePayment(ctx context.Context, tx pgx.Tx, p *payment.Payment) error {
	ids := p.EntitlementIDs
	if ids == nil {
		ids = []string{}
	}
	var refunded int64
	if p.RefundedAmount != nil {
		refunded = p.RefundedAmount.Cents
	}
	_, err := tx.Exec(ctx, `UPDATE payments SET status = $2, updated_at = $3, succeeded_at = $4, failed_at = $5,
		failure_reason = $6, refunded_at = $7, receipt_id = $8, refund_receipt_id = $9, entitlement_ids = $10,
		refunded_cents = $11, disputed_at = $12, dispute_reason = $13, provider_intent_id = $14, dispute_won_at = $15
		WHERE id = $1`, p.ID, string(p.Status), p.UpdatedAt, p.SucceededAt, p.FailedAt,
		p.FailureReason, p.RefundedAt, p.ReceiptID, p.RefundReceiptID, ids, refunded, p.DisputedAt, p.DisputeReason,
		p.ProviderIntentID, p.DisputeWonAt)
	return err
}
