package postgres_test

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/postgres"
)

// fleet is several instances of the store on one database, as several
// processes of Stipend behind a load balancer are: every call that writes
// goes to the next instance in turn, so concurrent callers of one
// entitlement, payment or key meet on different instances (whose lanes
// coalesce only their own calls). Reads go to the first instance; the
// database is the same.
type fleet struct {
	store.EntitlementStore
	members
}

// members are the stores of a fleet.
type members struct {
	all  []*postgres.Store
	next atomic.Uint64
}

// pick returns the next instance in turn.
func (i *members) pick() *postgres.Store { return i.all[i.next.Add(1)%uint64(len(i.all))] }

func newFleetOf(all []*postgres.Store) *fleet {
	return &fleet{EntitlementStore: all[0], members: members{all: all}}
}

// Close closes every instance.
func (f *fleet) Close() error {
	for _, s := range f.all {
		_ = s.Close()
	}
	return nil
}

func (f *fleet) UpsertAccount(ctx context.Context, a entitlement.Account) (entitlement.Account, error) {
	return f.pick().UpsertAccount(ctx, a)
}

func (f *fleet) CreateEntitlement(ctx context.Context, e entitlement.Entitlement) (entitlement.Entitlement, error) {
	return f.pick().CreateEntitlement(ctx, e)
}

func (f *fleet) RevokeEntitlement(ctx context.Context, id string) (entitlement.Entitlement, error) {
	return f.pick().RevokeEntitlement(ctx, id)
}

func (f *fleet) CheckAndConsume(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return f.pick().CheckAndConsume(ctx, req)
}

func (f *fleet) Check(ctx context.Context, req entitlement.ConsumeRequest) (store.ConsumeResult, error) {
	return f.pick().Check(ctx, req)
}

func (f *fleet) RefundConsumption(ctx context.Context, id string, a entitlement.Amount) (store.RefundResult, error) {
	return f.pick().RefundConsumption(ctx, id, a)
}

func (f *fleet) Authorize(ctx context.Context, req entitlement.HoldRequest) (store.HoldResult, error) {
	return f.pick().Authorize(ctx, req)
}

func (f *fleet) CaptureHold(ctx context.Context, id, agentID string, a entitlement.Amount) (store.HoldResult, error) {
	return f.pick().CaptureHold(ctx, id, agentID, a)
}

func (f *fleet) ReleaseHold(ctx context.Context, id, agentID string) (store.HoldResult, error) {
	return f.pick().ReleaseHold(ctx, id, agentID)
}

func (f *fleet) ExpireHolds(ctx context.Context, limit int) (int, error) {
	return f.pick().ExpireHolds(ctx, limit)
}

func (f *fleet) CreatePayment(ctx context.Context, p payment.Payment) (store.CreatePaymentResult, error) {
	return f.pick().CreatePayment(ctx, p)
}

func (f *fleet) CompletePayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return f.pick().CompletePayment(ctx, id, ch)
}

func (f *fleet) FailPayment(ctx context.Context, id string, ch store.PaymentChange) (payment.Payment, error) {
	return f.pick().FailPayment(ctx, id, ch)
}

func (f *fleet) RefundPayment(ctx context.Context, id string, ch store.PaymentChange) (store.Completion, error) {
	return f.pick().RefundPayment(ctx, id, ch)
}

func (f *fleet) MarkEventsDispatched(ctx context.Context, ids []string) error {
	return f.pick().MarkEventsDispatched(ctx, ids)
}

// deliveryFleet is fleet for store.DeliveryStore.
type deliveryFleet struct {
	store.DeliveryStore
	members
}

func newDeliveryFleetOf(all []*postgres.Store) *deliveryFleet {
	return &deliveryFleet{DeliveryStore: all[0], members: members{all: all}}
}

func (f *deliveryFleet) EnqueueDelivery(ctx context.Context, d store.Delivery) (store.Delivery, bool, error) {
	return f.pick().EnqueueDelivery(ctx, d)
}

func (f *deliveryFleet) ClaimDueDeliveries(ctx context.Context, now time.Time, limit int, ttl time.Duration, worker string) ([]store.Delivery, error) {
	return f.pick().ClaimDueDeliveries(ctx, now, limit, ttl, worker)
}

func (f *deliveryFleet) FinishDelivery(ctx context.Context, id, token string, r store.AttemptResult) (store.Delivery, error) {
	return f.pick().FinishDelivery(ctx, id, token, r)
}

func (f *deliveryFleet) RecordInboundEvent(ctx context.Context, source, eventID string) (bool, time.Time, error) {
	return f.pick().RecordInboundEvent(ctx, source, eventID)
}
