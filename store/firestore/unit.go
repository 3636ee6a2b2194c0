package firestore

import (
	"context"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
	"github.com/stipend-mcp/stipend/store/internal/unit"
	"github.com/stipend-mcp/stipend/topup"
)

// shared is what a Store embeds to have the methods of package ops.
type shared = ops.Shared

// unit runs fn in one transaction (unit.Run, on run's retries): fn's reads
// go to the transaction as it makes them, its writes are queued and reach
// the transaction after fn returned, so every read comes before every
// write, as Firestore requires.
func (s *Store) unit(ctx context.Context, what string, fn func(unit.Tx) error) error {
	return s.run(ctx, what, func(ctx context.Context, ftx *firestore.Transaction) error {
		t := &tx{s: s, ctx: ctx, tx: ftx}
		if err := fn(t); err != nil {
			return err
		}
		if err := t.writeIndex(); err != nil {
			return err
		}
		return all(t.writes)
	})
}

// tx is the Firestore store's unit.Tx.
type tx struct {
	s      *Store
	ctx    context.Context
	tx     *firestore.Transaction
	writes []func() error
	now    time.Time
	// expiry maps each open hold of the entitlements LockEntitlements read
	// to its expiry: a hold that expires ends then (entitlement.Hold.End).
	expiry map[string]time.Time
	// topUpCreated is the createdAt (the list order) of each top-up read.
	topUpCreated map[string]time.Time
	// status is the status of each entitlement read; members the
	// memberships read, by document ID (true: it exists). A write that
	// leaves them as read leaves the candidates as they are.
	status  map[string]entitlement.Status
	members map[string]bool
	// index is what the unit changes in the candidates of each account
	// (candidates.go), written after the unit's reads.
	index map[string]*indexChange
}

var _ unit.Tx = (*tx)(nil)

func (t *tx) Now() time.Time {
	t.now = t.s.clock()
	return t.now
}

// at is the instant of the change: Now's, or the clock's if never asked.
func (t *tx) at() time.Time {
	if t.now.IsZero() {
		return t.s.clock()
	}
	return t.now
}

func (t *tx) write(w func() error) { t.writes = append(t.writes, w) }

// create queues the creation of ref with data; set its replacement.
func (t *tx) create(ref *firestore.DocumentRef, data map[string]any) {
	t.write(func() error { return t.tx.Create(ref, data) })
}

func (t *tx) set(ref *firestore.DocumentRef, data map[string]any) {
	t.write(func() error { return t.tx.Set(ref, data) })
}

// source is where a read goes: the unit's transaction (tx), or the
// database directly (direct).
type source interface {
	get(*firestore.DocumentRef) (*firestore.DocumentSnapshot, error)
	all(firestore.Query) ([]*firestore.DocumentSnapshot, error)
}

func (t *tx) get(ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
	return t.tx.Get(ref)
}

func (t *tx) all(q firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	return t.tx.Documents(q).GetAll()
}

// direct reads outside any transaction; what names the read in errors.
type direct struct {
	ctx  context.Context
	what string
}

func (d direct) get(ref *firestore.DocumentRef) (*firestore.DocumentSnapshot, error) {
	snap, err := ref.Get(d.ctx)
	if err != nil && !isNotFound(err) {
		err = fsfault.Read(err, "%s", d.what)
	}
	return snap, err
}

func (d direct) all(q firestore.Query) ([]*firestore.DocumentSnapshot, error) {
	snaps, err := q.Documents(d.ctx).GetAll()
	if err != nil {
		err = fsfault.Read(err, "%s", d.what)
	}
	return snaps, err
}

// load reads ref from src and decodes it with from: absent if there is no
// such document.
func load[T any](src source, ref *firestore.DocumentRef, from func(*firestore.DocumentSnapshot) (T, error), absent error) (T, error) {
	snap, err := src.get(ref)
	if isNotFound(err) {
		err = absent
	}
	if err != nil {
		var zero T
		return zero, err
	}
	return from(snap)
}

// decodeAll decodes snaps with from, in order.
func decodeAll[T any](snaps []*firestore.DocumentSnapshot, from func(*firestore.DocumentSnapshot) (T, error)) ([]T, error) {
	out := make([]T, 0, len(snaps))
	for _, snap := range snaps {
		v, err := from(snap)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

// pointer decodes a pointer document: the ID in its field.
func pointer(field string) func(*firestore.DocumentSnapshot) (string, error) {
	return func(snap *firestore.DocumentSnapshot) (string, error) {
		f := read(snap)
		id := f.str(field)
		return id, f.err
	}
}

func (t *tx) Payment(id string) (payment.Payment, error) { return t.s.payment(t, id) }

func (t *tx) PaymentByKey(key string) (payment.Payment, error) { return t.s.paymentByKey(t, key) }

func (t *tx) PaymentByIntent(intentID string) (payment.Payment, error) {
	return t.s.paymentByIntent(t, intentID)
}

func (t *tx) Account(agentID string) (entitlement.Account, error) { return t.s.account(t, agentID) }

// TopUp reads the top-up of agentID, or, with none stored, the account.
func (t *tx) TopUp(agentID string) (topup.TopUp, error) {
	snap, err := t.tx.Get(t.s.doc(colTopUps, agentID))
	if isNotFound(err) {
		_, err = t.Account(agentID)
		return topup.TopUp{AgentID: agentID}, err
	} else if err != nil {
		return topup.TopUp{}, err
	}
	u, err := topUpFrom(snap)
	f := read(snap)
	if t.topUpCreated == nil {
		t.topUpCreated = make(map[string]time.Time)
	}
	t.topUpCreated[agentID] = f.instant("createdAt")
	if err == nil {
		err = f.err
	}
	return u, err
}

func (t *tx) Endpoint(id string) (store.Endpoint, error) { return t.s.endpoint(t, id) }

func (t *tx) Delivery(id string) (store.Delivery, error) { return t.s.delivery(t, id) }

// DeliveryByKey reads the key's pointer document
// (delivery_outbound_idempotency), then the delivery it points at.
func (t *tx) DeliveryByKey(key string) (store.Delivery, error) {
	id, err := load(t, t.s.doc(colDeliveryKeys, key), pointer("deliveryId"), store.Errorf(store.CodeNotFound, "delivery with key %q", key))
	if err != nil {
		return store.Delivery{}, err
	}
	return load(t, t.s.doc(colDeliveries, id), deliveryFrom, store.Errorf(store.CodeInternal, "corrupt data: key %q names missing delivery %s", key, id))
}

func (t *tx) Instant(at time.Time) time.Time { return stampOrZero(at) }

func (t *tx) InboundSeen(in store.InboundEvent) (bool, error) {
	_, err := t.tx.Get(t.s.inboundRef(in))
	switch {
	case err == nil:
		return true, nil
	case isNotFound(err):
		return false, nil
	}
	return false, err
}

func (t *tx) Receipt(id string) (receipt.Signed, error) { return t.s.receipt(t, id) }

// Entitlement reads the entitlement and folds in all its open leases (a
// change of its limits or expiry bounds what leases may hold, a revoke
// ends them), closing them with the unit's writes.
func (t *tx) Entitlement(id string) (entitlement.Entitlement, error) {
	e, err := load(t, t.s.entitlementRef(id), entitlementFrom, store.Errorf(store.CodeNotFound, "entitlement %q", id))
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	closeLeases, err := t.s.gatherAll(t.tx, &e)
	if err != nil {
		return entitlement.Entitlement{}, err
	}
	t.write(closeLeases)
	t.remember(e)
	return e, nil
}

// Entitlements reads entitlements by ID; a missing one is corruption.
func (t *tx) Entitlements(ids []string) ([]entitlement.Entitlement, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	refs := make([]*firestore.DocumentRef, len(ids))
	for i, id := range ids {
		refs[i] = t.s.entitlementRef(id)
	}
	snaps, err := t.tx.GetAll(refs)
	if err != nil {
		return nil, err
	}
	es, err := decodeAll(snaps, func(snap *firestore.DocumentSnapshot) (entitlement.Entitlement, error) {
		if !snap.Exists() {
			return entitlement.Entitlement{}, store.Errorf(store.CodeInternal, "corrupt data: payment names missing entitlement %s", docPath(snap.Ref))
		}
		return entitlementFrom(snap)
	})
	for i := range es {
		t.noteStatus(es[i])
	}
	return es, err
}

// noteStatus records e's status as read.
func (t *tx) noteStatus(e entitlement.Entitlement) {
	if t.status == nil {
		t.status = make(map[string]entitlement.Status)
	}
	t.status[e.ID] = e.Status
}

func (t *tx) LockEntitlements(ids []string) ([]entitlement.Entitlement, error) {
	es, err := t.Entitlements(ids)
	if err != nil {
		return nil, err
	}
	closeLeases, err := t.s.gatherActive(t.tx, es)
	if err != nil {
		return nil, err
	}
	t.write(closeLeases)
	for i := range es {
		t.remember(es[i])
	}
	return es, nil
}

// remember notes the expiry of each open hold of e, read for a change,
// and its status.
func (t *tx) remember(e entitlement.Entitlement) {
	t.noteStatus(e)
	if t.expiry == nil {
		t.expiry = make(map[string]time.Time)
	}
	for _, o := range e.Holds {
		t.expiry[o.ID] = o.ExpiresAt
	}
}

func (t *tx) Normalize(e entitlement.Entitlement) entitlement.Entitlement {
	return unit.Normalized(e, t.at(), stamp)
}

func (t *tx) Fence() error {
	fd, err := t.s.readFence(t.ctx, t.tx)
	if err != nil {
		return err
	}
	now := t.at()
	t.write(func() error { return fd.mark(t.tx, now) })
	return nil
}

func (t *tx) EnsureAccount(agentID string) error {
	ref := t.s.doc(colAccounts, agentID)
	if _, err := t.tx.Get(ref); !isNotFound(err) {
		return err
	}
	now := t.at()
	t.create(ref, accountDoc(&entitlement.Account{AgentID: agentID, CreatedAt: now, UpdatedAt: now}))
	return nil
}

func (t *tx) CreateEntitlement(e entitlement.Entitlement) {
	t.create(t.s.entitlementRef(e.ID), entitlementDoc(&e))
	t.indexEntitlement(&e)
}

func (t *tx) UpdateEntitlement(e entitlement.Entitlement, expired, released []string) {
	if was, ok := t.status[e.ID]; !ok || was != e.Status {
		t.indexEntitlement(&e)
	}
	now := t.at()
	t.write(func() error {
		for _, id := range expired {
			if err := t.s.endHold(t.tx, id, entitlement.HoldExpired, t.expiry[id]); err != nil {
				return err
			}
		}
		for _, id := range released {
			if err := t.s.endHold(t.tx, id, entitlement.HoldReleased, now); err != nil {
				return err
			}
		}
		return t.tx.Set(t.s.entitlementRef(e.ID), entitlementDoc(&e))
	})
}

func (t *tx) CreatePayment(p payment.Payment) {
	t.create(t.s.doc(colPayments, p.ID), paymentDoc(&p))
	t.create(t.s.doc(colPaymentsIdempotency, p.IdempotencyKey), map[string]any{"paymentId": p.ID, "createdAt": t.at()})
}

func (t *tx) PutAccount(a entitlement.Account) {
	t.set(t.s.doc(colAccounts, a.AgentID), accountDoc(&a))
}

func (t *tx) PutTopUp(u topup.TopUp) {
	created, ok := t.topUpCreated[u.AgentID]
	if !ok {
		created = t.at()
	}
	t.write(func() error {
		d, err := topUpDoc(&u, created)
		if err != nil {
			return err
		}
		return t.tx.Set(t.s.doc(colTopUps, u.AgentID), d)
	})
}

func (t *tx) PutPayment(p payment.Payment) { t.set(t.s.doc(colPayments, p.ID), paymentDoc(&p)) }

func (t *tx) CreateEndpoint(e store.Endpoint) { t.create(t.s.doc(colEndpoints, e.ID), endpointDoc(&e)) }

func (t *tx) PutEndpoint(e store.Endpoint) { t.set(t.s.doc(colEndpoints, e.ID), endpointDoc(&e)) }

func (t *tx) CreateDelivery(d store.Delivery) {
	t.create(t.s.doc(colDeliveryKeys, d.Key), map[string]any{"deliveryId": d.ID, "createdAt": d.CreatedAt})
	t.create(t.s.doc(colDeliveries, d.ID), deliveryDoc(&d))
}

func (t *tx) PutDelivery(d store.Delivery) { t.set(t.s.doc(colDeliveries, d.ID), deliveryDoc(&d)) }

func (t *tx) CreateReceipt(r receipt.Signed) {
	t.create(t.s.doc(colReceipts, r.ID), receiptDoc(&r))
}

func (t *tx) AddEvents(evs ...event.Event) {
	for i := range evs {
		t.create(t.s.col(colEvents).Doc(evs[i].ID), eventDoc(&evs[i]))
	}
}

func (t *tx) RecordInbound(in store.InboundEvent) {
	t.create(t.s.inboundRef(in), map[string]any{"source": in.Source, "eventId": in.EventID, "firstSeenAt": t.at()})
}

// inboundRef is the document recording the provider event in.
func (s *Store) inboundRef(in store.InboundEvent) *firestore.DocumentRef {
	return s.col(colInbound).Doc(unit.InboundKey(in.Source, in.EventID))
}

func claimFields(c *store.Claim) []field {
	return []field{opt(str("name", &c.Name)), str("owner", &c.Owner), instant("until", &c.Until)}
}

func (t *tx) Claim(name string) (store.Claim, error) {
	c, err := load(t, t.s.doc(colClaims, name), decoder(claimFields), store.Errorf(store.CodeNotFound, "claim %q", name))
	if err == nil {
		c.Name = name
	}
	return c, err
}

func (t *tx) PutClaim(c store.Claim, exists bool) {
	if exists {
		t.set(t.s.doc(colClaims, c.Name), encode(claimFields(&c)))
		return
	}
	t.create(t.s.doc(colClaims, c.Name), encode(claimFields(&c)))
}

// all runs writes in order and stops at the first error.
func all(writes []func() error) error {
	for _, w := range writes {
		if err := w(); err != nil {
			return err
		}
	}
	return nil
}
