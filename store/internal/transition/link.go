package transition

import (
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
)

// CheckLink refuses to link p to intentID (LinkProviderIntent) when p is
// linked to another intent or intentID is linked to another payment
// (takenElsewhere). Linking p to its own intent again is no error.
func CheckLink(p *payment.Payment, intentID string, takenElsewhere bool) error {
	switch {
	case p.ProviderIntentID != "" && p.ProviderIntentID != intentID:
		return store.Errorf(store.CodeConflict, "payment %q is linked to another provider intent", p.ID)
	case takenElsewhere:
		return store.Errorf(store.CodeConflict, "providerIntentId: already linked to another payment")
	}
	return nil
}

// CheckPendingFilter validates the filter of ListPendingPayments.
func CheckPendingFilter(f store.PendingFilter) error {
	switch {
	case !f.Provider.Valid():
		return store.Errorf(store.CodeInvalid, "provider: %q is not a payment provider", f.Provider)
	case f.CreatedBefore.IsZero():
		return store.Errorf(store.CodeInvalid, "createdBefore: required")
	}
	return nil
}
