package ops

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// This file holds the changes of webhook endpoints and deliveries
// (store.DeliveryStore) but the claim of due deliveries, a query each
// backend makes its own way; endpoint_rules.go and delivery_rules.go have
// their rules.

// CreateEndpoint is store.DeliveryStore.CreateEndpoint.
func (o Shared) CreateEndpoint(ctx context.Context, e store.Endpoint) (store.Endpoint, error) {
	var out store.Endpoint
	err := o.run(ctx, "create webhook endpoint", func(tx unit.Tx) error {
		if _, err := tx.Endpoint(e.ID); !errors.Is(err, store.ErrNotFound) {
			return found(err, store.CodeConflict, "webhook endpoint %s exists", e.ID)
		}
		n, err := newEndpoint(e, tx.Now())
		if err != nil {
			return err
		}
		if err := tx.Fence(); err != nil {
			return err
		}
		tx.CreateEndpoint(n)
		out = n
		return nil
	})
	return out, err
}

// changeEndpoint stores change of the endpoint id, in one unit of work
// with the fence the context carries.
func (o Shared) changeEndpoint(ctx context.Context, what, id string, change func(tx unit.Tx, e store.Endpoint, now time.Time) (store.Endpoint, error)) (store.Endpoint, error) {
	return fenced(ctx, o, what, func(tx unit.Tx) (store.Endpoint, error) { return tx.Endpoint(id) }, change, unit.Tx.PutEndpoint)
}

// fenced reads a record with read, changes it with change at the unit's
// now and stores it with write, in one unit of work with the fence the
// context carries.
func fenced[T any](ctx context.Context, o Shared, what string, read func(unit.Tx) (T, error),
	change func(tx unit.Tx, v T, now time.Time) (T, error), write func(unit.Tx, T)) (out T, err error) {
	err = o.run(ctx, what, func(tx unit.Tx) error {
		v, err := read(tx)
		if err != nil {
			return err
		}
		if v, err = change(tx, v, tx.Now()); err != nil {
			return err
		}
		if err := tx.Fence(); err != nil {
			return err
		}
		write(tx, v)
		out = v
		return nil
	})
	return out, err
}

// DisableEndpoint is store.DeliveryStore.DisableEndpoint.
func (o Shared) DisableEndpoint(ctx context.Context, id, reason string) (store.Endpoint, error) {
	return o.changeEndpoint(ctx, "disable webhook endpoint", id, func(_ unit.Tx, e store.Endpoint, now time.Time) (store.Endpoint, error) {
		return disableEndpoint(e, reason, now), nil
	})
}

// UpdateEndpoint is store.DeliveryStore.UpdateEndpoint.
func (o Shared) UpdateEndpoint(ctx context.Context, id string, u store.EndpointUpdate) (store.Endpoint, error) {
	return o.changeEndpoint(ctx, "update webhook endpoint", id, func(_ unit.Tx, e store.Endpoint, _ time.Time) (store.Endpoint, error) {
		return updateEndpoint(e, u)
	})
}

// RotateEndpointSecret is store.DeliveryStore.RotateEndpointSecret.
func (o Shared) RotateEndpointSecret(ctx context.Context, id, secret string, graceUntil time.Time) (store.Endpoint, error) {
	return o.changeEndpoint(ctx, "rotate webhook endpoint secret", id, func(tx unit.Tx, e store.Endpoint, _ time.Time) (store.Endpoint, error) {
		return rotateSecret(e, secret, tx.Instant(graceUntil))
	})
}

// EnqueueDelivery is store.DeliveryStore.EnqueueDelivery: a delivery with
// d's key answers the call (or is a Conflict); otherwise d is created.
func (o Shared) EnqueueDelivery(ctx context.Context, d store.Delivery) (store.Delivery, bool, error) {
	var out store.Delivery
	var created bool
	err := o.run(ctx, "enqueue delivery", func(tx unit.Tx) error {
		created = false
		n := d
		if err := checkNewDelivery(&n, tx.Now()); err != nil {
			return err
		}
		n.ScheduledAt = tx.Instant(n.ScheduledAt)
		if n.Payload == nil {
			n.Payload = []byte{}
		}
		prior, err := tx.DeliveryByKey(n.Key)
		if errors.Is(err, store.ErrNotFound) {
			// A delivery with n's ID and key is a concurrent call's that
			// committed between the reads (on PostgreSQL each statement
			// reads its own snapshot): it answers this one.
			if prior, err = tx.Delivery(n.ID); err == nil && prior.Key != n.Key {
				return store.Errorf(store.CodeConflict, "delivery %s exists", n.ID)
			}
		}
		switch {
		case err == nil:
			if prior.EndpointID != n.EndpointID || prior.EventID != n.EventID {
				return store.Errorf(store.CodeConflict, "delivery key reused for another event or endpoint")
			}
			out = prior
			return nil
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		tx.CreateDelivery(n)
		out, created = n, true
		return nil
	})
	if err != nil {
		return store.Delivery{}, false, err
	}
	return out, created, nil
}

// changeDelivery stores change of the delivery id, in one unit of work
// with the fence the context carries.
func (o Shared) changeDelivery(ctx context.Context, what, id string, change func(tx unit.Tx, d store.Delivery, now time.Time) (store.Delivery, error)) (store.Delivery, error) {
	return fenced(ctx, o, what, func(tx unit.Tx) (store.Delivery, error) { return tx.Delivery(id) }, change, unit.Tx.PutDelivery)
}

// FinishDelivery is store.DeliveryStore.FinishDelivery.
func (o Shared) FinishDelivery(ctx context.Context, id, claimToken string, r store.AttemptResult) (store.Delivery, error) {
	if err := checkAttempt(&r); err != nil {
		return store.Delivery{}, err
	}
	return o.changeDelivery(ctx, "finish delivery", id, func(tx unit.Tx, d store.Delivery, now time.Time) (store.Delivery, error) {
		if d.Status != store.DeliveryInFlight || d.ClaimToken != claimToken {
			return d, store.Errorf(store.CodeConflict, "delivery %s is no longer claimed with this token", id)
		}
		r := r
		r.RetryAt = tx.Instant(r.RetryAt)
		return applyAttempt(d, r, now), nil
	})
}

// RetryDelivery is store.DeliveryStore.RetryDelivery.
func (o Shared) RetryDelivery(ctx context.Context, id string) (store.Delivery, error) {
	return o.changeDelivery(ctx, "retry delivery", id, func(_ unit.Tx, d store.Delivery, now time.Time) (store.Delivery, error) {
		if d.Status != store.DeliveryFailed && d.Status != store.DeliveryDead {
			return d, store.Errorf(store.CodeConflict, "delivery %s is %s; only failed or dead deliveries can be retried", id, d.Status)
		}
		d.Status, d.ScheduledAt, d.UpdatedAt = store.DeliveryPending, now, now
		return d, nil
	})
}
