package transition

import (
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// RefusedPayment is the Conflict of a payment change that the payment's
// status does not allow (payment.Refuse): CompletePayment on a failed
// payment, FailPayment on a succeeded one, RefundPayment on a pending one.
func RefusedPayment(id string, from, to payment.Status) error {
	return store.Errorf(store.CodeConflict, "payment %q is %s: it cannot become %s", id, from, to)
}
