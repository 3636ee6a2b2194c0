package postgres

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// pendingEvent is an outbox event about to be written in a transaction;
// its data is encoded when it is queued.
type pendingEvent = unit.Pending

func pending(t event.Type, agentID string, data any) pendingEvent {
	return pendingEvent{Type: t, AgentID: agentID, Data: data}
}

const insertEventSQL = `INSERT INTO events (id, type, agent_id, occurred_at, data) VALUES ($1, $2, $3, $4, $5)`

// insertEvent returns the statement that writes p at now.
func insertEvent(p pendingEvent, now time.Time) (string, []any, error) {
	evs, err := unit.Events(now, p)
	if err != nil {
		return "", nil, err
	}
	return insertEventSQL, eventArgs(&evs[0]), nil
}

// eventArgs are the arguments of insertEventSQL for e.
func eventArgs(e *event.Event) []any {
	return []any{e.ID, string(e.Type), e.AgentID, e.OccurredAt, []byte(e.Data)}
}

// PendingEvents implements store.EntitlementStore.
func (s *Store) PendingEvents(ctx context.Context, limit int) ([]event.Event, error) {
	if limit <= 0 {
		return nil, store.Errorf(store.CodeInvalid, "limit: must be positive")
	}
	rows, err := s.pool.Query(ctx, `SELECT id, type, agent_id, occurred_at, data FROM events
		WHERE NOT dispatched ORDER BY occurred_at, seq LIMIT $1`, limit)
	if err != nil {
		return nil, pgfault.Read(err, "pending events")
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (event.Event, error) {
		var e event.Event
		var typ string
		var at *time.Time
		if err := r.Scan(&e.ID, &typ, &e.AgentID, &at, &e.Data); err != nil {
			return event.Event{}, err
		}
		check := &row{table: "events", id: e.ID}
		e.Type = event.Type(check.oneOf("type", typ, knownEvent(typ)))
		e.OccurredAt = check.required("occurred_at", at)
		return e, check.err
	})
	if err != nil {
		return nil, pgfault.Read(err, "pending events")
	}
	return out, nil
}

// knownEvent reports whether t is the name of an event type.
func knownEvent(t string) bool { return slices.Contains(event.Types, event.Type(t)) }

// MarkEventsDispatched implements store.EntitlementStore: one statement,
// so it is atomic here, which the contract allows.
func (s *Store) MarkEventsDispatched(ctx context.Context, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, `UPDATE events SET dispatched = true WHERE id = ANY($1) AND NOT dispatched`, ids); err != nil {
		return pgfault.Write(err, "mark events dispatched")
	}
	return nil
}
