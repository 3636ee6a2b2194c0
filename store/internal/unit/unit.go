// Package unit is the unit of work every store backend offers to the
// shared operations of package ops: a transaction whose reads each load one
// document or row (locking it where the backend locks) and whose writes are
// buffered and applied together, only when the whole function succeeds.
//
// A backend implements Tx and a Run on top of its own transaction and retry
// loop; it holds no business rule. Firestore's "every read before any
// write" holds by construction: writes reach the transaction only after fn
// returned. Only the adapters under store/ import this package.
package unit

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// Run runs fn in one atomic unit of work named what (for errors): its
// writes are applied if fn returns nil, and nothing is if it fails. fn may
// run more than once (a backend retries contention), so it must compute
// only from what it reads. Errors are translated to store codes.
type Run func(ctx context.Context, what string, fn func(Tx) error) error

// readOnly is the context key of ReadOnly.
type readOnly struct{}

// ReadOnly returns ctx marking the unit of work run with it as one that
// only reads and writes nothing: a backend may then make each read on its
// own, without a transaction, and lock nothing (PostgreSQL does).
func ReadOnly(ctx context.Context) context.Context { return context.WithValue(ctx, readOnly{}, true) }

// IsReadOnly reports whether ctx marks a unit of work ReadOnly.
func IsReadOnly(ctx context.Context) bool { return ctx.Value(readOnly{}) != nil }

// Clock is the instant of one unit of work's change, for a backend's Tx to
// embed: its Now (Tx.Now) reads Read and keeps the instant; At is that
// instant, or Read's if Now was never called.
type Clock struct {
	Read func() time.Time
	now  time.Time
}

// Now implements Tx.Now.
func (c *Clock) Now() time.Time {
	c.now = c.Read()
	return c.now
}

// At is the instant of the change: Now's, or Read's if Now was never called.
func (c *Clock) At() time.Time {
	if c.now.IsZero() {
		return c.Read()
	}
	return c.now
}

// FenceOf returns the fence ctx carries (store.FenceOf) as a T, the kind
// of fence the backend named backend checks, and false when ctx carries
// none. A fence of another kind is Internal: a ledger of another backend,
// which this one cannot check.
func FenceOf[T any](ctx context.Context, backend string) (T, bool, error) {
	var zero T
	f := store.FenceOf(ctx)
	if f == nil {
		return zero, false, nil
	}
	t, ok := f.(T)
	if !ok {
		return zero, false, store.Errorf(store.CodeInternal, "%s: the %s store cannot check this fence (a ledger of another backend)", f.Claim(), backend)
	}
	return t, true, nil
}

// Tx reads and writes inside one unit of work. Reads return store errors
// (ErrNotFound for an absent document); writes cannot fail when called:
// a backend reports their failure from Run.
type Tx interface {
	// Now is the instant of the change, in UTC at the backend's precision.
	// Call it after the reads that lock what the change orders against
	// (PostgreSQL's row locks), and use the one value for every write.
	Now() time.Time

	// Payment reads the payment id, locking it: ErrNotFound if absent.
	Payment(id string) (payment.Payment, error)
	// PaymentByKey reads the payment created with the idempotency key:
	// ErrNotFound if none was.
	PaymentByKey(key string) (payment.Payment, error)
	// PaymentByIntent reads the payment linked to the provider intent:
	// ErrNotFound if none is.
	PaymentByIntent(intentID string) (payment.Payment, error)
	// Account reads the account agentID, locking it: ErrNotFound if absent.
	Account(agentID string) (entitlement.Account, error)
	// TopUp reads the top-up of agentID's account, locking the account:
	// the zero TopUp (with AgentID) when none was stored, ErrNotFound for
	// an unknown account.
	TopUp(agentID string) (topup.TopUp, error)
	// Endpoint reads the webhook endpoint id: ErrNotFound if absent.
	Endpoint(id string) (store.Endpoint, error)
	// Delivery reads the delivery id: ErrNotFound if absent.
	Delivery(id string) (store.Delivery, error)
	// DeliveryByKey reads the delivery enqueued with key: ErrNotFound if
	// none was.
	DeliveryByKey(key string) (store.Delivery, error)
	// InboundSeen reports whether the provider event in was recorded.
	InboundSeen(in store.InboundEvent) (bool, error)
	// Receipt reads the receipt id: ErrNotFound if absent.
	Receipt(id string) (receipt.Signed, error)
	// Entitlement reads the entitlement id for a change of it, as
	// LockEntitlements does: ErrNotFound if absent.
	Entitlement(id string) (entitlement.Entitlement, error)
	// Entitlements reads the entitlements ids, in that order, without
	// locking them, to answer with; a missing one is corrupt data.
	Entitlements(ids []string) ([]entitlement.Entitlement, error)
	// LockEntitlements reads the entitlements ids, in that order, for a
	// change of them: PostgreSQL locks their rows (in ID order), Firestore
	// folds in the open escrow leases of the active ones and closes those
	// leases with the unit's writes. A missing one is corrupt data.
	LockEntitlements(ids []string) ([]entitlement.Entitlement, error)
	// Instant returns t in UTC at the backend's precision; zero stays zero.
	Instant(t time.Time) time.Time
	// Normalize returns the entitlement e as the backend stores it:
	// defaults filled (an active status, CreatedAt now), instants at its
	// precision, nothing shared with e.
	Normalize(e entitlement.Entitlement) entitlement.Entitlement
	// Fence checks the idempotency fence the context carries (none: nothing)
	// and marks it with the change; a fence that no longer holds fails the
	// unit (store.ErrFenced). Call it once the change is decided.
	Fence() error

	// EnsureAccount creates the account agentID, unless it exists.
	EnsureAccount(agentID string) error
	// CreateEntitlement stores the new, normalized entitlement e.
	CreateEntitlement(e entitlement.Entitlement)
	// UpdateEntitlement stores e, a changed entitlement read by Entitlement
	// or LockEntitlements, and ends its holds expired (at their expiry) and
	// released (at Now); an entitlement no longer active stops being a
	// candidate for charges.
	UpdateEntitlement(e entitlement.Entitlement, expired, released []string)
	// CreatePayment stores the new payment p under its ID and idempotency
	// key (and its provider intent, if any).
	CreatePayment(p payment.Payment)
	// PutPayment stores the changed payment p (its status, instants,
	// receipts, entitlements, refunds, dispute and provider intent).
	PutPayment(p payment.Payment)
	// PutAccount stores the account a, new or read by Account.
	PutAccount(a entitlement.Account)
	// PutTopUp stores the top-up t of its account.
	PutTopUp(t topup.TopUp)
	// CreateEndpoint stores the new endpoint e; PutEndpoint the changed e.
	CreateEndpoint(e store.Endpoint)
	PutEndpoint(e store.Endpoint)
	// CreateDelivery stores the new delivery d under its ID and key;
	// PutDelivery the changed d.
	CreateDelivery(d store.Delivery)
	PutDelivery(d store.Delivery)
	// CreateReceipt stores the new receipt r.
	CreateReceipt(r receipt.Signed)
	// AddEvents writes events to the outbox.
	AddEvents(evs ...event.Event)
	// RecordInbound records the provider event in, first seen at Now. If
	// another unit recorded it meanwhile, this one starts over.
	RecordInbound(in store.InboundEvent)

	// Membership reads the membership of memberID in the wallet walletID,
	// locking it where the backend locks: ErrNotFound if absent.
	Membership(walletID, memberID string) (entitlement.Membership, error)
	// PutMembership stores the membership m, new or read by Membership
	// (its open holds included).
	PutMembership(m entitlement.Membership)
	// DeleteMembership deletes the membership of memberID in walletID,
	// read by Membership.
	DeleteMembership(walletID, memberID string)

	// Claim reads the claim of job name, locking it: ErrNotFound if the job
	// was never claimed. PutClaim stores c, over the claim Claim read
	// (exists) or as a new one: if another unit created it meanwhile, this
	// one starts over.
	Claim(name string) (store.Claim, error)
	PutClaim(c store.Claim, exists bool)
}

// Pending is an outbox event about to be written: Data is encoded as its
// JSON when Events makes the event.
type Pending struct {
	Type    event.Type
	AgentID string
	Data    any
}

// Events makes the outbox events of one change at now, each with a new ID
// and its data encoded as a JSON object.
func Events(now time.Time, ps ...Pending) ([]event.Event, error) {
	out := make([]event.Event, len(ps))
	for i, p := range ps {
		raw, err := json.Marshal(p.Data)
		if err != nil {
			return nil, store.Wrap(store.CodeInternal, err, "event %s: encoding its data", p.Type)
		}
		out[i] = event.Event{ID: uuid.NewString(), Type: p.Type, AgentID: p.AgentID, OccurredAt: now, Data: raw}
	}
	return out, nil
}
