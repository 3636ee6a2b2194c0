package ops

import (
	"context"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
	"github.com/stipend-mcp/stipend/topup"
)

// This file holds the point reads of the store contract, each made in a
// unit of work that only reads (unit.ReadOnly).

// get reads the record key with read in a read-only unit named what.
func get[T any](ctx context.Context, o Shared, what, key string, read func(unit.Tx, string) (T, error)) (out T, err error) {
	err = o.run(unit.ReadOnly(ctx), what, func(tx unit.Tx) (err error) {
		out, err = read(tx, key)
		return err
	})
	return out, err
}

// GetPayment is store.EntitlementStore.GetPayment.
func (o Shared) GetPayment(ctx context.Context, id string) (payment.Payment, error) {
	return get(ctx, o, "get payment", id, unit.Tx.Payment)
}

// FindPaymentByIdempotencyKey is store.EntitlementStore.FindPaymentByIdempotencyKey.
func (o Shared) FindPaymentByIdempotencyKey(ctx context.Context, key string) (payment.Payment, error) {
	return get(ctx, o, "get payment", key, unit.Tx.PaymentByKey)
}

// FindPaymentByProviderIntentID is store.EntitlementStore.FindPaymentByProviderIntentID.
func (o Shared) FindPaymentByProviderIntentID(ctx context.Context, intentID string) (payment.Payment, error) {
	if intentID == "" {
		return payment.Payment{}, store.Errorf(store.CodeNotFound, "payment for provider intent")
	}
	return get(ctx, o, "get payment", intentID, unit.Tx.PaymentByIntent)
}

// GetReceipt is store.EntitlementStore.GetReceipt.
func (o Shared) GetReceipt(ctx context.Context, id string) (receipt.Signed, error) {
	return get(ctx, o, "get receipt", id, unit.Tx.Receipt)
}

// GetAccount is store.EntitlementStore.GetAccount.
func (o Shared) GetAccount(ctx context.Context, agentID string) (entitlement.Account, error) {
	return get(ctx, o, "get account", agentID, unit.Tx.Account)
}

// GetTopUp is store.TopUps.GetTopUp.
func (o Shared) GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	return get(ctx, o, "get top-up", agentID, unit.Tx.TopUp)
}

// GetEndpoint is store.DeliveryStore.GetEndpoint.
func (o Shared) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	return get(ctx, o, "get webhook endpoint", id, unit.Tx.Endpoint)
}

// GetDelivery is store.DeliveryStore.GetDelivery.
func (o Shared) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	return get(ctx, o, "get delivery", id, unit.Tx.Delivery)
}

// GetEntitlement is store.EntitlementStore.GetEntitlement: the entitlement
// as it is now (a pending lazy reset shown applied).
func (o Shared) GetEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error) {
	return get(ctx, o, "get entitlement", id, func(tx unit.Tx, id string) (entitlement.Entitlement, error) {
		e, err := tx.Entitlement(id)
		if err == nil {
			e.Refresh(tx.Now())
		}
		return e, err
	})
}
