package postgres

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
)

const deliveryColumns = `id, key, endpoint_id, event_id, event_type, payload, status, attempts, scheduled_at,
	claimed_by, claimed_at, claim_token, last_status_code, last_error, last_attempt_at, created_at, updated_at`

func scanDelivery(rows pgx.Row) (store.Delivery, error) {
	var d store.Delivery
	var typ, status string
	var scheduled, claimed, lastAttempt, created, updated *time.Time
	if err := rows.Scan(&d.ID, &d.Key, &d.EndpointID, &d.EventID, &typ, &d.Payload, &status, &d.Attempts, &scheduled,
		&d.ClaimedBy, &claimed, &d.ClaimToken, &d.LastStatusCode, &d.LastError, &lastAttempt, &created, &updated); err != nil {
		return store.Delivery{}, err
	}
	r := &row{table: "deliveries", id: d.ID}
	d.EventType = event.Type(r.oneOf("event_type", typ, knownEvent(typ)))
	d.Status = store.DeliveryStatus(r.oneOf("status", status, store.DeliveryStatus(status).Valid()))
	d.Attempts = int(r.nonNegative("attempts", int64(d.Attempts)))
	d.ScheduledAt = r.required("scheduled_at", scheduled)
	d.ClaimedAt, d.LastAttemptAt = instantPtr(claimed), instantPtr(lastAttempt)
	d.CreatedAt, d.UpdatedAt = r.required("created_at", created), r.required("updated_at", updated)
	if d.Payload == nil {
		d.Payload = []byte{}
	}
	return d, r.err
}

// EnqueueDelivery implements store.DeliveryStore. The unique key is the
// guard: an insert that finds the key taken (after waiting for its
// concurrent inserter) inserts nothing, and the call returns that delivery.
func (s *Store) EnqueueDelivery(ctx context.Context, d store.Delivery) (store.Delivery, bool, error) {
	if err := transition.CheckNewDelivery(&d, s.clock()); err != nil {
		return store.Delivery{}, false, err
	}
	d.ScheduledAt, d.CreatedAt, d.UpdatedAt = stamp(d.ScheduledAt), stamp(d.CreatedAt), stamp(d.UpdatedAt)
	var (
		out     store.Delivery
		created bool
	)
	err := s.run(ctx, "enqueue delivery", func(tx pgx.Tx) error {
		created = false
		tag, err := tx.Exec(ctx, `INSERT INTO deliveries (id, key, endpoint_id, event_id, event_type, payload, status,
			scheduled_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
			d.ID, d.Key, d.EndpointID, d.EventID, string(d.EventType), d.Payload, string(d.Status), d.ScheduledAt, d.CreatedAt, d.UpdatedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 1 {
			out, created = d, true
			return nil
		}
		prior, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE key = $1`, d.Key))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.Errorf(store.CodeConflict, "delivery %s exists", d.ID) // the ID, not the key, was taken
		}
		if err != nil {
			return err
		}
		if prior.EndpointID != d.EndpointID || prior.EventID != d.EventID {
			return store.Errorf(store.CodeConflict, "delivery key reused for another event or endpoint")
		}
		out = prior
		return nil
	})
	if err != nil {
		return store.Delivery{}, false, err
	}
	if out.Payload == nil {
		out.Payload = []byte{}
	}
	return out, created, nil
}

// GetDelivery implements store.DeliveryStore.
func (s *Store) GetDelivery(ctx context.Context, id string) (store.Delivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Delivery{}, store.Errorf(store.CodeNotFound, "delivery %s", id)
	}
	if err != nil {
		return store.Delivery{}, pgfault.Read(err, "get delivery")
	}
	return d, nil
}

// ListDeliveries implements store.DeliveryStore.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter, p store.Page) ([]store.Delivery, string, error) {
	q := listQuery{
		name:  "deliveries",
		from:  `SELECT ` + deliveryColumns + ` FROM deliveries WHERE true`,
		order: "created_at",
		parts: []string{string(f.Status), string(f.EventType)},
	}
	if f.Status != "" {
		q.args = append(q.args, string(f.Status))
		q.from += " AND status = $" + strconv.Itoa(len(q.args))
	}
	if f.EventType != "" {
		q.args = append(q.args, string(f.EventType))
		q.from += " AND event_type = $" + strconv.Itoa(len(q.args))
	}
	return list(ctx, s.pool, q, p, scanDelivery, func(d *store.Delivery) (time.Time, string) { return d.CreatedAt, d.ID })
}

// ClaimDueDeliveries implements store.DeliveryStore in one statement: the
// oldest expired claims, then the oldest due deliveries, are locked with
// FOR UPDATE SKIP LOCKED, so a row another worker is claiming is skipped
// rather than waited for (and rechecked after its claim commits: it is no
// longer due), and each row is claimed by exactly one caller.
func (s *Store) ClaimDueDeliveries(ctx context.Context, now time.Time, limit int, claimTTL time.Duration, workerID string) ([]store.Delivery, error) {
	if limit <= 0 {
		return nil, nil
	}
	now = stamp(now)
	rows, err := s.pool.Query(ctx, `WITH
		stale AS (SELECT id, claimed_at AS due FROM deliveries
			WHERE status = 'in_flight' AND claimed_at <= $2 ORDER BY claimed_at, id LIMIT $3 FOR UPDATE SKIP LOCKED),
		ready AS (SELECT id, scheduled_at AS due FROM deliveries
			WHERE status = 'pending' AND scheduled_at <= $1 ORDER BY scheduled_at, id LIMIT $3 FOR UPDATE SKIP LOCKED),
		pick AS (SELECT id, due, rank FROM (SELECT id, due, 0 AS rank FROM stale UNION ALL SELECT id, due, 1 FROM ready) c
			ORDER BY rank, due, id LIMIT $3)
		UPDATE deliveries d SET status = 'in_flight', attempts = d.attempts + 1, claimed_by = $4, claimed_at = $1,
			claim_token = gen_random_uuid()::text, updated_at = $5
		FROM pick WHERE d.id = pick.id
		RETURNING pick.rank, pick.due, `+prefixed("d.", deliveryColumns),
		now, now.Add(-claimTTL), limit, workerID, s.clock())
	if err != nil {
		return nil, pgfault.Write(err, "claim due deliveries")
	}
	type claimed struct {
		rank int
		due  time.Time
		d    store.Delivery
	}
	list, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (claimed, error) {
		var c claimed
		var err error
		c.d, err = scanDelivery(prefixScan{r, []any{&c.rank, &c.due}})
		return c, err
	})
	if err != nil {
		return nil, pgfault.Write(err, "claim due deliveries")
	}
	slices.SortFunc(list, func(a, b claimed) int {
		if a.rank != b.rank {
			return a.rank - b.rank
		}
		if c := a.due.Compare(b.due); c != 0 {
			return c
		}
		return strings.Compare(a.d.ID, b.d.ID)
	})
	out := make([]store.Delivery, len(list))
	for i := range list {
		out[i] = list[i].d
	}
	return out, nil
}

// FinishDelivery implements store.DeliveryStore.
func (s *Store) FinishDelivery(ctx context.Context, id, claimToken string, r store.AttemptResult) (store.Delivery, error) {
	if err := transition.CheckAttemptResult(&r); err != nil {
		return store.Delivery{}, err
	}
	r.RetryAt = stampOrZero(r.RetryAt)
	return s.updateDelivery(ctx, "finish delivery", id, func(d store.Delivery) (store.Delivery, error) {
		if d.Status != store.DeliveryInFlight || d.ClaimToken != claimToken {
			return d, store.Errorf(store.CodeConflict, "delivery %s is no longer claimed with this token", id)
		}
		return transition.ApplyAttempt(d, r, s.clock()), nil
	})
}

// RetryDelivery implements store.DeliveryStore.
func (s *Store) RetryDelivery(ctx context.Context, id string) (store.Delivery, error) {
	return s.updateDelivery(ctx, "retry delivery", id, func(d store.Delivery) (store.Delivery, error) {
		if d.Status != store.DeliveryFailed && d.Status != store.DeliveryDead {
			return d, store.Errorf(store.CodeConflict, "delivery %s is %s; only failed or dead deliveries can be retried", id, d.Status)
		}
		now := s.clock()
		d.Status, d.ScheduledAt, d.UpdatedAt = store.DeliveryPending, now, now
		return d, nil
	})
}

// updateDelivery locks, changes (with change) and writes one delivery in a
// transaction.
func (s *Store) updateDelivery(ctx context.Context, what, id string, change func(store.Delivery) (store.Delivery, error)) (store.Delivery, error) {
	var out store.Delivery
	err := s.run(ctx, what, func(tx pgx.Tx) error {
		d, err := scanDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM deliveries WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return store.Errorf(store.CodeNotFound, "delivery %s", id)
		}
		if err != nil {
			return err
		}
		if d, err = change(d); err != nil {
			return err
		}
		if err := s.markFence(ctx, tx, s.clock()); err != nil {
			return err
		}
		out = d
		_, err = tx.Exec(ctx, `UPDATE deliveries SET status = $2, attempts = $3, scheduled_at = $4, claimed_by = $5,
			claimed_at = $6, claim_token = $7, last_status_code = $8, last_error = $9, last_attempt_at = $10, updated_at = $11
			WHERE id = $1`, d.ID, string(d.Status), d.Attempts, d.ScheduledAt, d.ClaimedBy, d.ClaimedAt, d.ClaimToken,
			d.LastStatusCode, d.LastError, d.LastAttemptAt, d.UpdatedAt)
		return err
	})
	return out, err
}

// insertInboundSQL records an inbound provider event unless it was.
const insertInboundSQL = `INSERT INTO inbound_events (source, event_id, first_seen_at) VALUES ($1, $2, $3)
	ON CONFLICT DO NOTHING`

// RecordInboundEvent implements store.DeliveryStore: an insert that does
// nothing when the event was recorded, then, for a later caller, a read of
// the first time. Of concurrent callers exactly one inserts.
func (s *Store) RecordInboundEvent(ctx context.Context, source, eventID string) (bool, time.Time, error) {
	if source == "" || eventID == "" {
		return false, time.Time{}, store.Errorf(store.CodeInvalid, "source and eventId: required")
	}
	now := s.clock()
	tag, err := s.pool.Exec(ctx, insertInboundSQL, source, eventID, now)
	if err != nil {
		return false, time.Time{}, pgfault.Write(err, "record inbound event")
	}
	if tag.RowsAffected() == 1 {
		return true, now, nil
	}
	var first time.Time
	if err := s.pool.QueryRow(ctx, `SELECT first_seen_at FROM inbound_events WHERE source = $1 AND event_id = $2`,
		source, eventID).Scan(&first); err != nil {
		return false, time.Time{}, pgfault.Read(err, "read inbound event")
	}
	return false, first.UTC(), nil
}
