package memory

import (
	"context"
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
	"github.com/stipend-mcp/stipend/store/internal/unit"
	"github.com/stipend-mcp/stipend/topup"
)

// shared is what a Store embeds to have the methods of package ops.
type shared = ops.Shared

// unit runs fn under the mutex (unit.Run): reads copy out of the maps,
// writes are queued and applied, after the fence is marked, only when fn
// succeeds, so a failed call changes nothing.
func (s *Store) unit(ctx context.Context, _ string, fn func(unit.Tx) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := &tx{s: s, Clock: unit.Clock{Read: s.clock}}
	if err := fn(t); err != nil {
		return err
	}
	if t.fenced {
		if err := markFence(ctx); err != nil {
			return err
		}
	}
	for _, w := range t.writes {
		w()
	}
	return nil
}

// tx is the memory store's unit.Tx.
type tx struct {
	s *Store
	unit.Clock
	writes []func()
	fenced bool
}

var _ unit.Tx = (*tx)(nil)

// found returns conv of what m holds under k, or notFound if it holds nothing.
func found[V, T any](m map[string]V, k string, conv func(V) T, notFound error) (T, error) {
	v, ok := m[k]
	if !ok {
		var zero T
		return zero, notFound
	}
	return conv(v), nil
}

// payment is a copy of the stored payment id, which exists.
func (t *tx) payment(id string) payment.Payment { return t.s.payments[id].Clone() }

func (t *tx) Payment(id string) (payment.Payment, error) {
	return found(t.s.payments, id, (*payment.Payment).Clone, store.Errorf(store.CodeNotFound, "payment %q", id))
}

func (t *tx) PaymentByKey(key string) (payment.Payment, error) {
	return found(t.s.byPayKey, key, t.payment, store.Errorf(store.CodeNotFound, "payment with that idempotency key"))
}

func (t *tx) PaymentByIntent(intentID string) (payment.Payment, error) {
	return found(t.s.byIntent, intentID, t.payment, store.Errorf(store.CodeNotFound, "payment with provider intent %q", intentID))
}

func (t *tx) Account(agentID string) (entitlement.Account, error) {
	return found(t.s.accounts, agentID, copyAccount, noAccount(agentID))
}

func (t *tx) TopUp(agentID string) (topup.TopUp, error) {
	if t.s.accounts[agentID] == nil {
		return topup.TopUp{}, noAccount(agentID)
	}
	if stored := t.s.topups[agentID]; stored != nil {
		return stored.Clone(), nil
	}
	return topup.TopUp{AgentID: agentID}, nil
}

func (t *tx) Endpoint(id string) (store.Endpoint, error) {
	return found(t.s.endpoints, id, copyEndpoint, endpointNotFound(id))
}

func (t *tx) Delivery(id string) (store.Delivery, error) {
	return found(t.s.deliveries, id, copyDelivery, store.Errorf(store.CodeNotFound, "delivery %s", id))
}

func (t *tx) DeliveryByKey(key string) (store.Delivery, error) {
	return found(t.s.byDeliveryKey, key, func(id string) store.Delivery { return copyDelivery(t.s.deliveries[id]) },
		store.Errorf(store.CodeNotFound, "delivery with key %q", key))
}

// Instant is at in UTC (the zero time stays zero).
func (t *tx) Instant(at time.Time) time.Time { return at.UTC() }

func (t *tx) InboundSeen(in store.InboundEvent) (bool, error) {
	_, ok := t.s.inbound[unit.InboundKey(in.Source, in.EventID)]
	return ok, nil
}

func (t *tx) Receipt(id string) (receipt.Signed, error) {
	return found(t.s.receipts, id, (*receipt.Signed).Clone, store.Errorf(store.CodeNotFound, "receipt %q", id))
}

func (t *tx) Entitlement(id string) (entitlement.Entitlement, error) {
	return found(t.s.entitlements, id, (*entitlement.Entitlement).Clone, store.Errorf(store.CodeNotFound, "entitlement %q", id))
}

func (t *tx) Entitlements(ids []string) ([]entitlement.Entitlement, error) {
	var out []entitlement.Entitlement
	for _, id := range ids {
		e := t.s.entitlements[id]
		if e == nil {
			return nil, store.Errorf(store.CodeInternal, "corrupt data: missing entitlement %s", id)
		}
		out = append(out, e.Clone())
	}
	return out, nil
}

func (t *tx) LockEntitlements(ids []string) ([]entitlement.Entitlement, error) {
	return t.Entitlements(ids)
}

func (t *tx) Normalize(e entitlement.Entitlement) entitlement.Entitlement {
	return unit.Normalized(e, t.At(), time.Time.UTC)
}

func (t *tx) Fence() error {
	t.fenced = true
	return nil
}

func (t *tx) EnsureAccount(agentID string) error {
	t.writes = append(t.writes, func() { t.s.ensureAccount(agentID) })
	return nil
}

func (t *tx) CreateEntitlement(e entitlement.Entitlement) {
	e = e.Clone()
	t.writes = append(t.writes, func() { t.s.putEntitlement(&e) })
}

func (t *tx) UpdateEntitlement(e entitlement.Entitlement, expired, released []string) {
	e, now := e.Clone(), t.At()
	t.writes = append(t.writes, func() {
		stored := t.s.entitlements[e.ID]
		*stored = e
		t.s.endHolds(expired, entitlement.HoldExpired, now)
		t.s.endHolds(released, entitlement.HoldReleased, now)
		if e.Status != entitlement.StatusActive {
			a := t.s.agents[e.AgentID]
			a.active = slices.DeleteFunc(a.active, func(x *entitlement.Entitlement) bool { return x == stored })
		}
	})
}

func (t *tx) CreatePayment(p payment.Payment) {
	p = p.Clone()
	t.writes = append(t.writes, func() {
		t.s.payments[p.ID] = &p
		t.s.byPayKey[p.IdempotencyKey] = p.ID
		if p.ProviderIntentID != "" {
			t.s.byIntent[p.ProviderIntentID] = p.ID
		}
	})
}

func (t *tx) PutAccount(a entitlement.Account) {
	a = copyAccount(&a)
	t.writes = append(t.writes, func() { t.s.accounts[a.AgentID] = &a })
}

func (t *tx) PutTopUp(u topup.TopUp) {
	u = u.Clone()
	t.writes = append(t.writes, func() { t.s.topups[u.AgentID] = &u })
}

func (t *tx) PutPayment(p payment.Payment) {
	p = p.Clone()
	t.writes = append(t.writes, func() {
		if p.ProviderIntentID != "" {
			t.s.byIntent[p.ProviderIntentID] = p.ID
		}
		*t.s.payments[p.ID] = p
	})
}

func (t *tx) CreateEndpoint(e store.Endpoint) { t.PutEndpoint(e) }

func (t *tx) PutEndpoint(e store.Endpoint) {
	e = copyEndpoint(e)
	t.writes = append(t.writes, func() { t.s.endpoints[e.ID] = e })
}

func (t *tx) CreateDelivery(d store.Delivery) {
	t.PutDelivery(d)
	t.writes = append(t.writes, func() { t.s.byDeliveryKey[d.Key] = d.ID })
}

func (t *tx) PutDelivery(d store.Delivery) {
	d = copyDelivery(d)
	t.writes = append(t.writes, func() { t.s.deliveries[d.ID] = d })
}

func (t *tx) CreateReceipt(r receipt.Signed) {
	r = r.Clone()
	t.writes = append(t.writes, func() { t.s.putReceipt(&r) })
}

func (t *tx) AddEvents(evs ...event.Event) {
	t.writes = append(t.writes, func() { t.s.events.add(evs...) })
}

func (t *tx) RecordInbound(in store.InboundEvent) {
	key, now := unit.InboundKey(in.Source, in.EventID), t.At()
	t.writes = append(t.writes, func() { t.s.inbound[key] = now })
}

func (t *tx) Claim(name string) (store.Claim, error) {
	return found(t.s.claims, name, func(c store.Claim) store.Claim { return c }, store.Errorf(store.CodeNotFound, "claim %q", name))
}

func (t *tx) PutClaim(c store.Claim, _ bool) {
	t.writes = append(t.writes, func() { t.s.claims[c.Name] = c })
}
