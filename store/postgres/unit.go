package postgres

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/ops"
	"github.com/stipend-mcp/stipend/store/internal/unit"
	"github.com/stipend-mcp/stipend/topup"
)

// shared is what a Store embeds to have the methods of package ops.
type shared = ops.Shared

// unit runs fn in one transaction (unit.Run, on run's retries): reads are
// queries made as fn asks, the rows of a change locked FOR UPDATE; writes
// are queued and executed, in order, after fn returned. A unit.ReadOnly
// one makes its reads on the pool, each a statement of its own that locks
// nothing.
func (s *Store) unit(ctx context.Context, what string, fn func(unit.Tx) error) error {
	if unit.IsReadOnly(ctx) {
		return pgfault.Read(fn(&tx{s: s, Clock: unit.Clock{Read: s.clock}, ctx: ctx, q: s.pool}), "%s", what)
	}
	return s.run(ctx, what, func(ptx pgx.Tx) error {
		t := &tx{s: s, Clock: unit.Clock{Read: s.clock}, ctx: ctx, tx: ptx, q: ptx, lock: " FOR UPDATE"}
		if err := fn(t); err != nil {
			return err
		}
		for _, w := range t.writes {
			if err := w(); err != nil {
				return err
			}
		}
		return nil
	})
}

// tx is the PostgreSQL store's unit.Tx: reads are made on q (the
// transaction, or the pool when read-only); those of a change end with lock.
type tx struct {
	s *Store
	// Clock reads the store's clock after the locks taken so far: see
	// Store.clock.
	unit.Clock
	ctx    context.Context
	tx     pgx.Tx
	q      querier
	lock   string
	writes []func() error
	// accounts says which accounts Account found: PutAccount updates
	// those and inserts the others; memberships the same of Membership
	// (wallet, member) for PutMembership.
	accounts    map[string]bool
	memberships map[[2]string]bool
}

var _ unit.Tx = (*tx)(nil)

func (t *tx) write(w func() error) { t.writes = append(t.writes, w) }

// exec queues the statement q.
func (t *tx) exec(q string, args ...any) {
	t.write(func() error {
		_, err := t.tx.Exec(t.ctx, q, args...)
		return err
	})
}

// insert queues the guarded insert q (ON CONFLICT DO NOTHING): if it
// inserts nothing, a concurrent transaction took the row meanwhile and the
// unit starts over, to read it.
func (t *tx) insert(q string, args ...any) {
	t.write(func() error {
		tag, err := t.tx.Exec(t.ctx, q, args...)
		if err == nil && tag.RowsAffected() != 1 {
			return errRetry
		}
		return err
	})
}

// one reads on db the row sql selects, with scan: absent if there is none.
// A read of a unit's that locks what it reads ends sql with t.lock.
func one[T any](ctx context.Context, db querier, scan func(pgx.Row) (T, error), absent error, sql string, args ...any) (T, error) {
	v, err := scan(db.QueryRow(ctx, sql, args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return v, absent
	}
	return v, err
}

func (t *tx) Payment(id string) (payment.Payment, error) {
	return one(t.ctx, t.q, scanPayment, store.Errorf(store.CodeNotFound, "payment %q", id),
		`SELECT `+paymentColumns+` FROM payments WHERE id = $1`+t.lock, id)
}

func (t *tx) PaymentByKey(key string) (payment.Payment, error) {
	return one(t.ctx, t.q, scanPayment, store.Errorf(store.CodeNotFound, "payment for idempotency key"),
		`SELECT `+paymentColumns+` FROM payments WHERE idempotency_key = $1`, key)
}

func (t *tx) PaymentByIntent(intentID string) (payment.Payment, error) {
	return one(t.ctx, t.q, scanPayment, store.Errorf(store.CodeNotFound, "payment for provider intent %q", intentID),
		`SELECT `+paymentColumns+` FROM payments WHERE provider_intent_id = $1`, intentID)
}

func (t *tx) Account(agentID string) (entitlement.Account, error) {
	a, err := one(t.ctx, t.q, scanAccount, store.Errorf(store.CodeNotFound, "account %q", agentID),
		`SELECT `+accountColumns+` FROM accounts WHERE agent_id = $1`+t.lock, agentID)
	if err == nil {
		if t.accounts == nil {
			t.accounts = make(map[string]bool)
		}
		t.accounts[agentID] = true
	}
	return a, err
}

func (t *tx) TopUp(agentID string) (topup.TopUp, error) {
	return readTopUp(t.ctx, t.q, agentID, t.lock)
}

func (t *tx) Endpoint(id string) (store.Endpoint, error) {
	return one(t.ctx, t.q, scanEndpoint, errEndpointNotFound(id),
		`SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1`+t.lock, id)
}

func (t *tx) Delivery(id string) (store.Delivery, error) {
	return one(t.ctx, t.q, scanDelivery, store.Errorf(store.CodeNotFound, "delivery %s", id),
		`SELECT `+deliveryColumns+` FROM deliveries WHERE id = $1`+t.lock, id)
}

func (t *tx) DeliveryByKey(key string) (store.Delivery, error) {
	return one(t.ctx, t.q, scanDelivery, store.Errorf(store.CodeNotFound, "delivery with key %q", key),
		`SELECT `+deliveryColumns+` FROM deliveries WHERE key = $1`, key)
}

// Instant is stamp's: the zero time stays zero.
func (t *tx) Instant(at time.Time) time.Time { return stamp(at) }

func (t *tx) InboundSeen(in store.InboundEvent) (bool, error) {
	var seen bool
	err := t.q.QueryRow(t.ctx, `SELECT EXISTS (SELECT 1 FROM inbound_events WHERE source = $1 AND event_id = $2)`,
		in.Source, in.EventID).Scan(&seen)
	return seen, err
}

func (t *tx) Receipt(id string) (receipt.Signed, error) {
	return one(t.ctx, t.q, scanReceipt, store.Errorf(store.CodeNotFound, "receipt %q", id),
		`SELECT `+receiptColumns+` FROM receipts WHERE id = $1`, id)
}

func (t *tx) Entitlement(id string) (entitlement.Entitlement, error) {
	return readEntitlement(t.ctx, t.q, id, t.lock)
}

func (t *tx) Entitlements(ids []string) ([]entitlement.Entitlement, error) {
	return entitlementsByID(t.ctx, t.q, ids, false)
}

func (t *tx) LockEntitlements(ids []string) ([]entitlement.Entitlement, error) {
	return entitlementsByID(t.ctx, t.q, ids, true)
}

// entitlementsByID reads the entitlements ids inside tx, in that order,
// locking them (in ID order, so two transactions never lock them in
// opposite orders) when lock is set. A missing one is corruption.
func entitlementsByID(ctx context.Context, tx querier, ids []string, lock bool) ([]entitlement.Entitlement, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	q := `SELECT ` + entitlementColumns + ` FROM entitlements WHERE id = ANY($1) ORDER BY id`
	if lock {
		q += ` FOR UPDATE`
	}
	rows, err := tx.Query(ctx, q, ids)
	if err != nil {
		return nil, err
	}
	es, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (entitlement.Entitlement, error) { return scanEntitlement(r) })
	if err != nil {
		return nil, err
	}
	out := make([]entitlement.Entitlement, 0, len(ids))
	for _, id := range ids {
		i := slices.IndexFunc(es, func(e entitlement.Entitlement) bool { return e.ID == id })
		if i < 0 {
			return nil, store.Errorf(store.CodeInternal, "corrupt data: missing entitlement %s", id)
		}
		out = append(out, es[i])
	}
	return out, nil
}

func (t *tx) Normalize(e entitlement.Entitlement) entitlement.Entitlement {
	return unit.Normalized(e, t.At(), stamp)
}

// Fence marks the fence at once: the UPDATE locks the ledger row until the
// transaction ends.
func (t *tx) Fence() error { return t.s.markFence(t.ctx, t.tx, t.At()) }

func (t *tx) EnsureAccount(agentID string) error {
	t.exec(`INSERT INTO accounts (agent_id, created_at, updated_at) VALUES ($1, $2, $2)
		ON CONFLICT (agent_id) DO NOTHING`, agentID, t.At())
	return nil
}

// CreateEntitlement inserts e; if its fresh UUID collided, the unit starts
// over with another.
func (t *tx) CreateEntitlement(e entitlement.Entitlement) {
	args, err := entitlementArgs(&e)
	if err != nil {
		t.write(func() error { return err })
		return
	}
	t.insert(insertEntitlementSQL, args...)
}

func (t *tx) UpdateEntitlement(e entitlement.Entitlement, expired, released []string) {
	now := t.At()
	t.write(func() error {
		if err := endHolds(t.ctx, t.tx, expired, entitlement.HoldExpired, now); err != nil {
			return err
		}
		if err := endHolds(t.ctx, t.tx, released, entitlement.HoldReleased, now); err != nil {
			return err
		}
		return updateEntitlement(t.ctx, t.tx, &e)
	})
}

// CreatePayment inserts the new pending payment p; if a concurrent
// transaction took its key, ID or intent, the unit starts over and reads
// what that one wrote.
func (t *tx) CreatePayment(p payment.Payment) {
	var sessionID, checkoutURL string
	var checkoutExpires *time.Time
	if c := p.Checkout; c != nil {
		sessionID, checkoutURL, checkoutExpires = c.SessionID, c.URL, &c.ExpiresAt
	}
	t.insert(`INSERT INTO payments (`+paymentColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, NULL, NULL, '', NULL, '', '', '{}', $12, $13, $14, $15, $16, 0, NULL, '', NULL)
		ON CONFLICT DO NOTHING`,
		p.ID, p.AgentID, p.Amount.Cents, p.Amount.Currency, string(p.Provider), p.ProviderIntentID, p.Description,
		p.Grant, string(p.Status), p.CreatedAt, p.UpdatedAt, p.IdempotencyKey, p.Fingerprint, sessionID, checkoutURL, checkoutExpires)
}

// PutAccount updates an account Account found, or inserts a new one; if a
// concurrent transaction inserted it meanwhile, the unit starts over and
// reads it.
// (pgx encodes the jsonb columns' values as their JSON.)
func (t *tx) PutAccount(a entitlement.Account) {
	metadata := metadataOrEmpty(a.Metadata)
	if t.accounts[a.AgentID] {
		t.exec(`UPDATE accounts SET display_name = $2, metadata = $3, updated_at = $4, limits = $5
			WHERE agent_id = $1`, a.AgentID, a.DisplayName, metadata, a.UpdatedAt, a.Limits)
		return
	}
	t.insert(`INSERT INTO accounts (`+accountColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)
		ON CONFLICT (agent_id) DO NOTHING`, a.AgentID, a.DisplayName, metadata, a.CreatedAt, a.UpdatedAt, a.Limits, string(a.Kind))
}

// PutTopUp writes the top-up document of its account (migration 00005).
func (t *tx) PutTopUp(u topup.TopUp) {
	t.exec(`UPDATE accounts SET topup = $2, topup_watched = $3 WHERE agent_id = $1`, u.AgentID, &u, u.Watched())
}

// PutPayment writes p's changing fields.
func (t *tx) PutPayment(p payment.Payment) {
	ids := p.EntitlementIDs
	if ids == nil {
		ids = []string{}
	}
	var refunded int64
	if p.RefundedAmount != nil {
		refunded = p.RefundedAmount.Cents
	}
	t.exec(`UPDATE payments SET status = $2, updated_at = $3, succeeded_at = $4, failed_at = $5,
		failure_reason = $6, refunded_at = $7, receipt_id = $8, refund_receipt_id = $9, entitlement_ids = $10,
		refunded_cents = $11, disputed_at = $12, dispute_reason = $13, provider_intent_id = $14, dispute_won_at = $15
		WHERE id = $1`, p.ID, string(p.Status), p.UpdatedAt, p.SucceededAt, p.FailedAt,
		p.FailureReason, p.RefundedAt, p.ReceiptID, p.RefundReceiptID, ids, refunded, p.DisputedAt, p.DisputeReason,
		p.ProviderIntentID, p.DisputeWonAt)
}

// CreateEndpoint inserts e; if a concurrent transaction took its ID, the
// unit starts over and reads that endpoint.
func (t *tx) CreateEndpoint(e store.Endpoint) {
	t.insert(`INSERT INTO webhook_endpoints (id, url, event_types, secret, created_at)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`, e.ID, e.URL, eventTypeStrings(e.EventTypes), e.Secret, e.CreatedAt)
}

func (t *tx) PutEndpoint(e store.Endpoint) {
	t.exec(`UPDATE webhook_endpoints SET url = $2, event_types = $3, secret = $4, previous_secret = $5,
		previous_secret_expires_at = $6, disabled = $7, disabled_reason = $8, disabled_at = $9 WHERE id = $1`,
		e.ID, e.URL, eventTypeStrings(e.EventTypes), e.Secret, e.PreviousSecret, nullTimePtr(e.PreviousSecretExpiresAt),
		e.Disabled, e.DisabledReason, nullTimePtr(e.DisabledAt))
}

// CreateDelivery inserts d; if a concurrent transaction took its key or
// ID, the unit starts over and reads that delivery.
func (t *tx) CreateDelivery(d store.Delivery) {
	t.insert(`INSERT INTO deliveries (id, key, endpoint_id, event_id, event_type, payload, status,
		scheduled_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
		d.ID, d.Key, d.EndpointID, d.EventID, string(d.EventType), d.Payload, string(d.Status), d.ScheduledAt, d.CreatedAt, d.UpdatedAt)
}

func (t *tx) PutDelivery(d store.Delivery) {
	t.exec(`UPDATE deliveries SET status = $2, attempts = $3, scheduled_at = $4, claimed_by = $5,
		claimed_at = $6, claim_token = $7, last_status_code = $8, last_error = $9, last_attempt_at = $10, updated_at = $11
		WHERE id = $1`, d.ID, string(d.Status), d.Attempts, d.ScheduledAt, d.ClaimedBy, d.ClaimedAt, d.ClaimToken,
		d.LastStatusCode, d.LastError, d.LastAttemptAt, d.UpdatedAt)
}

// CreateReceipt inserts the signed receipt r, its payload as its JSON.
func (t *tx) CreateReceipt(r receipt.Signed) {
	t.exec(`INSERT INTO receipts (id, agent_id, payment_id, issued_at, payload, jws)
		VALUES ($1, $2, $3, $4, $5, $6)`, r.ID, r.AgentID, r.PaymentID, r.IssuedAt, r.Receipt, r.JWS)
}

func (t *tx) AddEvents(evs ...event.Event) {
	for i := range evs {
		t.exec(insertEventSQL, eventArgs(&evs[i])...)
	}
}

// RecordInbound inserts the record RecordInboundEvent writes. If another
// transaction recorded it meanwhile, the whole unit starts over and then
// answers as the replay it is.
func (t *tx) RecordInbound(in store.InboundEvent) {
	t.insert(insertInboundSQL, in.Source, in.EventID, t.At())
}

func (t *tx) Claim(name string) (store.Claim, error) {
	c := store.Claim{Name: name}
	err := t.q.QueryRow(t.ctx, `SELECT owner, until FROM job_claims WHERE name = $1`+t.lock, name).Scan(&c.Owner, &c.Until)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Claim{}, store.Errorf(store.CodeNotFound, "claim %q", name)
	}
	return c, err
}

func (t *tx) PutClaim(c store.Claim, exists bool) {
	if exists {
		t.exec(`UPDATE job_claims SET owner = $2, until = $3 WHERE name = $1`, c.Name, c.Owner, stamp(c.Until))
		return
	}
	t.insert(`INSERT INTO job_claims (name, owner, until) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING`, c.Name, c.Owner, stamp(c.Until))
}
