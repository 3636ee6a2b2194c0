package entitlement

import (
	"errors"
	"fmt"

	"github.com/stipend-mcp/stipend/money"
)

// Validate checks what every store relies on before it stores e. Errors are
// *FieldError values naming the field.
func (e *Entitlement) Validate() error {
	switch {
	case e.ID == "":
		return &FieldError{"id", "is required"}
	case e.AgentID == "":
		return &FieldError{"agentId", "is required"}
	case !e.Type.Valid():
		return &FieldError{"type", fmt.Sprintf("%q is not an entitlement type", e.Type)}
	case e.Status != "" && !e.Status.Valid():
		return &FieldError{"status", fmt.Sprintf("%q is not an entitlement status", e.Status)}
	case e.Scope.Service == "":
		return &FieldError{"scope.service", "is required"}
	}
	switch e.Type {
	case TypeCredits:
		if err := moneyField("credits.balance", e.Credits.Balance); err != nil {
			return err
		}
		if e.Credits.Balance.Cents < 0 {
			return &FieldError{"credits.balance.cents", "must not be negative"}
		}
		if !e.Credits.Granted.IsZero() {
			return moneyField("credits.granted", e.Credits.Granted)
		}
	case TypeQuota:
		if e.Quota.Limit < 0 || e.Quota.Remaining < 0 || !e.Quota.Period.Valid() {
			return &FieldError{"quota", "needs a valid period and non-negative limit and remaining"}
		}
	}
	return nil
}

// moneyField validates m and names its field under path.
func moneyField(path string, m money.Money) error {
	err := m.Validate()
	var fe *money.FieldError
	if errors.As(err, &fe) {
		return &FieldError{path + "." + fe.Field, fe.Reason}
	}
	return err
}
