package ops

import (
	"slices"
	"time"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
)

// newEndpoint validates an endpoint passed to CreateEndpoint and fills in
// the fields the store owns, at now.
func newEndpoint(e store.Endpoint, now time.Time) (store.Endpoint, error) {
	if err := e.Validate(); err != nil {
		return store.Endpoint{}, err
	}
	e.CreatedAt = now.UTC()
	e.Disabled, e.DisabledReason, e.DisabledAt = false, "", nil
	e.PreviousSecret, e.PreviousSecretExpiresAt = "", nil
	e.EventTypes = slices.Clone(e.EventTypes)
	if e.EventTypes == nil {
		e.EventTypes = []event.Type{}
	}
	return e, nil
}

// disableEndpoint returns e disabled with reason at now, or e as it is if it
// is disabled already (the first reason stays).
func disableEndpoint(e store.Endpoint, reason string, now time.Time) store.Endpoint {
	if !e.Disabled {
		t := now.UTC()
		e.Disabled, e.DisabledReason, e.DisabledAt = true, reason, &t
	}
	return e
}

// updateEndpoint returns e with u applied, or an Invalid error naming the
// field if the result does not pass Validate.
func updateEndpoint(e store.Endpoint, u store.EndpointUpdate) (store.Endpoint, error) {
	if u.URL != nil {
		e.URL = *u.URL
	}
	if u.EventTypes != nil {
		e.EventTypes = slices.Clone(*u.EventTypes)
		if e.EventTypes == nil {
			e.EventTypes = []event.Type{}
		}
	}
	if u.Enable {
		e.Disabled, e.DisabledReason, e.DisabledAt = false, "", nil
	}
	if err := e.Validate(); err != nil {
		return store.Endpoint{}, err
	}
	return e, nil
}

// rotateSecret returns e with secret as its Secret and the replaced one as
// PreviousSecret until graceUntil (none when graceUntil is zero).
func rotateSecret(e store.Endpoint, secret string, graceUntil time.Time) (store.Endpoint, error) {
	if err := store.CheckSecret("secret", secret); err != nil {
		return store.Endpoint{}, err
	}
	e.PreviousSecret, e.PreviousSecretExpiresAt = "", nil
	if !graceUntil.IsZero() {
		t := graceUntil.UTC()
		e.PreviousSecret, e.PreviousSecretExpiresAt = e.Secret, &t
	}
	e.Secret = secret
	return e, nil
}
