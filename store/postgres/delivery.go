package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
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

// ListDeliveries implements store.DeliveryStore.
func (s *Store) ListDeliveries(ctx context.Context, f store.DeliveryFilter, p store.Page) ([]store.Delivery, string, error) {
	q := listQuery{
		name:  "deliveries",
		from:  `SELECT ` + deliveryColumns + ` FROM deliveries WHERE true`,
		order: "created_at",
		parts: []string{string(f.Status), string(f.EventType)},
	}
	if f.Status != "" {
		q.where("status", "=", string(f.Status))
	}
	if f.EventType != "" {
		q.where("event_type", "=", string(f.EventType))
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
			ORDER BY rank, due, id LIMIT $3),
		claimed AS (UPDATE deliveries d SET status = 'in_flight', attempts = d.attempts + 1, claimed_by = $4, claimed_at = $1,
			claim_token = gen_random_uuid()::text, updated_at = $5
		FROM pick WHERE d.id = pick.id
		RETURNING pick.rank, pick.due, d.*)
		SELECT `+deliveryColumns+` FROM claimed ORDER BY rank, due, id`,
		now, now.Add(-claimTTL), limit, workerID, s.clock())
	if err != nil {
		return nil, pgfault.Write(err, "claim due deliveries")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Delivery, error) { return scanDelivery(r) })
	if err != nil {
		return nil, pgfault.Write(err, "claim due deliveries")
	}
	return out, nil
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
