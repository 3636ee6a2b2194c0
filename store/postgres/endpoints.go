package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/internal/pgfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/transition"
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

// CreateEndpoint implements store.DeliveryStore.
func (s *Store) CreateEndpoint(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	e, err := transition.NewEndpoint(e, s.clock())
	if err != nil {
		return store.Endpoint{}, err
	}
	// A transaction, so that a fence is checked with the insert.
	err = s.run(ctx, "create webhook endpoint", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO webhook_endpoints (id, url, event_types, secret, created_at)
			VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`, e.ID, e.URL, eventTypeStrings(e.EventTypes), e.Secret, e.CreatedAt)
		if err != nil {
			return err
		}
		if tag.RowsAffected() != 1 {
			return store.Errorf(store.CodeConflict, "webhook endpoint %s exists", e.ID)
		}
		return s.markFence(ctx, tx, e.CreatedAt)
	})
	if err != nil {
		return store.Endpoint{}, err
	}
	return e, nil
}

// GetEndpoint implements store.DeliveryStore.
func (s *Store) GetEndpoint(ctx context.Context, id string) (store.Endpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1`, id))
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Endpoint{}, errEndpointNotFound(id)
	}
	if err != nil {
		return store.Endpoint{}, pgfault.Read(err, "get webhook endpoint")
	}
	return e, nil
}

// ListEndpoints implements store.DeliveryStore.
func (s *Store) ListEndpoints(ctx context.Context, p store.Page) ([]store.Endpoint, string, error) {
	q := listQuery{name: "endpoints", from: `SELECT ` + endpointColumns + ` FROM webhook_endpoints WHERE true`, order: "created_at"}
	return list(ctx, s.pool, q, p, scanEndpoint, func(e *store.Endpoint) (time.Time, string) { return e.CreatedAt, e.ID })
}

// DisableEndpoint implements store.DeliveryStore.
func (s *Store) DisableEndpoint(ctx context.Context, id, reason string) (store.Endpoint, error) {
	return s.changeEndpoint(ctx, "disable webhook endpoint", id, func(e store.Endpoint) (store.Endpoint, error) {
		return transition.DisableEndpoint(e, reason, s.clock()), nil
	})
}

// UpdateEndpoint implements store.DeliveryStore.
func (s *Store) UpdateEndpoint(ctx context.Context, id string, u store.EndpointUpdate) (store.Endpoint, error) {
	return s.changeEndpoint(ctx, "update webhook endpoint", id, func(e store.Endpoint) (store.Endpoint, error) {
		return transition.UpdateEndpoint(e, u)
	})
}

// RotateEndpointSecret implements store.DeliveryStore.
func (s *Store) RotateEndpointSecret(ctx context.Context, id, secret string, graceUntil time.Time) (store.Endpoint, error) {
	graceUntil = stampOrZero(graceUntil)
	return s.changeEndpoint(ctx, "rotate webhook endpoint secret", id, func(e store.Endpoint) (store.Endpoint, error) {
		return transition.RotateSecret(e, secret, graceUntil)
	})
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

// changeEndpoint locks, changes (with change, which may run more than once)
// and writes one endpoint in a transaction, so concurrent changes of
// different fields all take effect.
func (s *Store) changeEndpoint(ctx context.Context, what, id string, change func(store.Endpoint) (store.Endpoint, error)) (store.Endpoint, error) {
	var out store.Endpoint
	err := s.run(ctx, what, func(tx pgx.Tx) error {
		e, err := scanEndpoint(tx.QueryRow(ctx, `SELECT `+endpointColumns+` FROM webhook_endpoints WHERE id = $1 FOR UPDATE`, id))
		if errors.Is(err, pgx.ErrNoRows) {
			return errEndpointNotFound(id)
		}
		if err != nil {
			return err
		}
		if e, err = change(e); err != nil {
			return err
		}
		if err := s.markFence(ctx, tx, s.clock()); err != nil {
			return err
		}
		out = e
		_, err = tx.Exec(ctx, `UPDATE webhook_endpoints SET url = $2, event_types = $3, secret = $4, previous_secret = $5,
			previous_secret_expires_at = $6, disabled = $7, disabled_reason = $8, disabled_at = $9 WHERE id = $1`,
			e.ID, e.URL, eventTypeStrings(e.EventTypes), e.Secret, e.PreviousSecret, nullTimePtr(e.PreviousSecretExpiresAt),
			e.Disabled, e.DisabledReason, nullTimePtr(e.DisabledAt))
		return err
	})
	return out, err
}
