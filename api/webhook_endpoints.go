package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// endpointBody is the body of POST /v1/webhook-endpoints.
type endpointBody struct {
	URL        string       `json:"url" validate:"required,max=2048"`
	EventTypes []event.Type `json:"eventTypes" validate:"max=20"`
}

// endpointPatch is the body of PATCH /v1/webhook-endpoints/{id}: absent
// (or null) members stay as they are.
type endpointPatch struct {
	URL        *string       `json:"url" validate:"omitnil,max=2048"`
	EventTypes *[]event.Type `json:"eventTypes" validate:"omitnil,max=20"`
	// Disabled may only be false: it enables the endpoint again. Disabling
	// is POST …/disable, which records a reason.
	Disabled *bool `json:"disabled"`
}

// rotateBody is the optional body of POST /v1/webhook-endpoints/{id}/rotate-secret.
type rotateBody struct {
	// GracePeriodSeconds is how long the replaced secret keeps signing;
	// absent or null: webhook.DefaultSecretGrace.
	GracePeriodSeconds nullable[int64] `json:"gracePeriodSeconds"`
}

// endpointWithSecret is the answer of creation and rotation: the only
// times a secret is shown.
type endpointWithSecret struct {
	store.Endpoint
	Secret string `json:"secret"`
}

// shown is e as the API shows it at now: the end of the previous secret's
// grace period only while it lasts.
func shown(e store.Endpoint, now time.Time) store.Endpoint {
	if !e.InGrace(now) {
		e.PreviousSecretExpiresAt = nil
	}
	return e
}

// checkURL refuses a URL the stores accept but this server does not
// register: a private target, unless they are allowed.
func (w *webhookRoutes) checkURL(raw string) error {
	if w.allowPrivate {
		return nil
	}
	if err := webhook.CheckTarget(raw); err != nil {
		return Invalid("url", err.Error())
	}
	return nil
}

func (w *webhookRoutes) createEndpoint(c echo.Context) error {
	var b endpointBody
	if err := w.s.decode(c, &b); err != nil {
		return err
	}
	e := store.Endpoint{ID: uuid.NewString(), URL: b.URL, EventTypes: b.EventTypes, Secret: webhook.NewSecret()}
	if e.EventTypes == nil {
		e.EventTypes = []event.Type{}
	}
	if err := e.Validate(); err != nil {
		return fieldInvalid(err)
	}
	if err := w.checkURL(e.URL); err != nil {
		return err
	}
	created, err := w.deliveries.CreateEndpoint(storeCtx(c), e)
	return answer(c, http.StatusCreated, endpointWithSecret{Endpoint: shown(created, w.s.now()), Secret: created.Secret}, fieldInvalid(err))
}

// fieldInvalid turns a store Invalid error, whose message starts with the
// field ("url: must be …"), into a 400 naming that field.
func fieldInvalid(err error) error {
	var se *store.Error
	if errors.As(err, &se) && se.Code == store.CodeInvalid {
		field, detail, ok := strings.Cut(se.Message, ": ")
		if !ok {
			field, detail = "", se.Message
		}
		return Invalid(field, detail)
	}
	return err
}

func (w *webhookRoutes) listEndpoints(c echo.Context) error {
	p, err := page(c)
	if err != nil {
		return err
	}
	items, next, err := w.deliveries.ListEndpoints(storeCtx(c), p)
	now := w.s.now()
	for i := range items {
		items[i] = shown(items[i], now)
	}
	return answerList(c, items, next, err)
}

func (w *webhookRoutes) getEndpoint(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	e, err := w.deliveries.GetEndpoint(storeCtx(c), id)
	return answer(c, http.StatusOK, shown(e, w.s.now()), err)
}

// updateEndpoint is PATCH /v1/webhook-endpoints/{id}: a new URL (checked
// as at registration), new event types, or "disabled": false to enable the
// endpoint again.
func (w *webhookRoutes) updateEndpoint(c echo.Context) error {
	id, b, err := withBody[endpointPatch](c, idParam, w.s.decode)
	if err != nil {
		return err
	}
	if b.Disabled != nil && *b.Disabled {
		return Invalid("disabled", "may only be false (enable the endpoint again); disable it with POST /v1/webhook-endpoints/{id}/disable, which records a reason")
	}
	if b.URL != nil {
		if err := store.ValidateURL(*b.URL); err != nil {
			return fieldInvalid(err)
		}
		if err := w.checkURL(*b.URL); err != nil {
			return err
		}
	}
	u := store.EndpointUpdate{URL: b.URL, EventTypes: b.EventTypes, Enable: b.Disabled != nil}
	e, err := w.deliveries.UpdateEndpoint(storeCtx(c), id, u)
	return answer(c, http.StatusOK, shown(e, w.s.now()), fieldInvalid(err))
}

// deleteEndpoint is DELETE /v1/webhook-endpoints/{id}: 204, or 404 when
// there is no such endpoint (a repeated delete included).
func (w *webhookRoutes) deleteEndpoint(c echo.Context) error {
	id, _, err := withBody[emptyBody](c, idParam, w.s.decodeOptional)
	if err != nil {
		return err
	}
	if err := w.deliveries.DeleteEndpoint(storeCtx(c), id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// rotateSecret is POST /v1/webhook-endpoints/{id}/rotate-secret: a new
// secret, shown once, with the replaced one signing too for the grace
// period.
func (w *webhookRoutes) rotateSecret(c echo.Context) error {
	id, b, err := withBody[rotateBody](c, idParam, w.s.decodeOptional)
	if err != nil {
		return err
	}
	grace := webhook.DefaultSecretGrace
	if g := b.GracePeriodSeconds; g.Set && !g.Null {
		maxSeconds := int64(webhook.MaxSecretGrace / time.Second)
		if g.V < 0 || g.V > maxSeconds {
			return Invalid("gracePeriodSeconds", fmt.Sprintf("must be between 0 and %d (%s)", maxSeconds, webhook.MaxSecretGrace))
		}
		grace = time.Duration(g.V) * time.Second
	}
	var until time.Time
	now := w.s.now()
	if grace > 0 {
		until = now.Add(grace)
	}
	e, err := w.deliveries.RotateEndpointSecret(storeCtx(c), id, webhook.NewSecret(), until)
	return answer(c, http.StatusOK, endpointWithSecret{Endpoint: shown(e, now), Secret: e.Secret}, err)
}

// disableBody is the optional body of POST /v1/webhook-endpoints/{id}/disable.
type disableBody struct {
	Reason string `json:"reason" validate:"max=500"`
}

func (w *webhookRoutes) disableEndpoint(c echo.Context) error {
	id, b, err := withBody[disableBody](c, idParam, w.s.decodeOptional)
	if err != nil {
		return err
	}
	if b.Reason == "" {
		b.Reason = "disabled by an operator"
	}
	e, err := w.deliveries.DisableEndpoint(storeCtx(c), id, b.Reason)
	return answer(c, http.StatusOK, shown(e, w.s.now()), err)
}
