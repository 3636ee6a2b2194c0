package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
)

const endpointColumns = `id, url, event_types, secret, previous_secret, previous_secret_expires_at,
	disabled, disabled_reason, disabled_at, created_at`

func scanEndpoint(rows pgx.Row) (store.Endpoint, error) {
	var e store.Endpoint
	var types []string
	var previousExpires, disabledAt, created *time.Time
	if err := rows.Scan(&e.ID, &e.URL, &types, &e.Secret, &e.PreviousSecret, &previousExpires,
		&e.Disabled, &e.DisabledReason, &disabledAt, &created); err != nil {
		return store.Endpoint{}, err
	}
	r := &row{table: "webhook_endpoints", id: e.ID}
	e.EventTypes = make([]event.Type, len(types))
	for i, t := range types {
		e.EventTypes[i] = event.Type(r.oneOf("event_types", t, knownEvent(t)))
	}
	e.PreviousSecretExpiresAt, e.DisabledAt = instantPtr(previousExpires), instantPtr(disabledAt)
	e.CreatedAt = r.required("created_at", created)
	return e, r.err
}

func errEndpointNotFound(id string) error {
	return store.Errorf(store.CodeNotFound, "webhook endpoint %s", id)
}

func eventTypeStrings(ts []event.Type) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = string(t)
	}
	return out
}

// ListEndpoints implements store.DeliveryStore.
func (s *Store) ListEndpoints(ctx context.Context, p store.Page) ([]store.Endpoint, string, error) {
	q := listQuery{name: "endpoints", from: `SELECT ` + endpointColumns + ` FROM webhook_endpoints WHERE true`, order: "created_at"}
	return list(ctx, s.pool, q, p, scanEndpoint, func(e *store.Endpoint) (time.Time, string) { return e.CreatedAt, e.ID })
}

// DeleteEndpoint implements store.DeliveryStore: one statement; the
// endpoint's deliveries stay.
func (s *Store) DeleteEndpoint(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
	if err != nil {
		return pgfault.Write(err, "delete webhook endpoint")
	}
	if tag.RowsAffected() != 1 {
		return errEndpointNotFound(id)
	}
	return nil
}
