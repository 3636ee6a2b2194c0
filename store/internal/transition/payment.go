package transition

import (
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// RefusedPayment is the Conflict of a payment change that the payment's
// status does not allow (payment.Refuse): CompletePayment on a failed
// payment, FailPayment on a succeeded one, RefundPayment on a pending one.
func RefusedPayment(id string, from, to payment.Status) error {
	return store.Errorf(store.CodeConflict, "payment %q is %s: it cannot become %s", id, from, to)
}

// NewReceipt is a new receipt of kind for payment paymentID of agentID:
// amount and grants, issued by issuer at now.
func NewReceipt(kind receipt.Kind, issuer, agentID, paymentID string, amount money.Money, grants []receipt.Grant, now time.Time) receipt.Receipt {
	return receipt.Receipt{
		ID: uuid.NewString(), Version: receipt.Version, Kind: kind,
		Issuer: issuer, AgentID: agentID, PaymentID: paymentID, Amount: amount,
		Grants: grants, IssuedAt: now,
	}
}

// SignReceipt signs r with ch.Sign for a payment change that issues a
// receipt (complete, refund): Invalid without a signing function, Internal
// when signing fails.
func SignReceipt(ch *store.PaymentChange, r receipt.Receipt) (receipt.Signed, error) {
	if ch.Sign == nil {
		return receipt.Signed{}, store.Errorf(store.CodeInvalid, "payment change: no signing function")
	}
	jws, err := ch.Sign(r)
	if err != nil {
		return receipt.Signed{}, store.Wrap(store.CodeInternal, err, "signing receipt %s", r.ID)
	}
	return receipt.Signed{Receipt: r, JWS: jws}, nil
}
