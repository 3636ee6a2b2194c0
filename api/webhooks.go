package api

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// WebhookConfig enables the webhook routes: webhook endpoints and
// deliveries (admin) and the Stripe event receiver (Stripe signature).
type WebhookConfig struct {
	// Deliveries holds endpoints and deliveries; nil uses Config.Store,
	// which then must implement store.DeliveryStore (both stores do).
	Deliveries store.DeliveryStore
	// StripeSecret verifies Stripe-Signature; empty refuses every Stripe
	// event with 503 (Stripe retries until it is configured).
	StripeSecret string
}

// maxStripeBody bounds a Stripe event body (Stripe's events are far smaller).
const maxStripeBody = 512 << 10

// webhookRoutes serves the routes of WebhookConfig.
type webhookRoutes struct {
	s          *Server
	deliveries store.DeliveryStore
	stripe     *webhook.Stripe
}

// registerWebhooks adds the webhook routes when cfg is set.
func (s *Server) registerWebhooks(cfg *WebhookConfig) {
	if cfg == nil {
		return
	}
	w := &webhookRoutes{s: s, deliveries: cfg.Deliveries}
	if w.deliveries == nil {
		ds, ok := s.store.(store.DeliveryStore)
		if !ok {
			panic("api: WebhookConfig.Deliveries is nil and Config.Store is not a store.DeliveryStore")
		}
		w.deliveries = ds
	}
	w.stripe = &webhook.Stripe{Payments: s.store, Secret: cfg.StripeSecret, Issuer: s.issuer, Logger: s.log}
	if s.signer != nil {
		w.stripe.Sign = s.signer.Sign
	}
	g := s.echo.Group("/v1")
	admin := s.auth(apikey.RoleAdmin)
	g.POST("/webhook-endpoints", w.createEndpoint, admin)
	g.GET("/webhook-endpoints", w.listEndpoints, admin)
	g.GET("/webhook-endpoints/:id", w.getEndpoint, admin)
	g.POST("/webhook-endpoints/:id/disable", w.disableEndpoint, admin)
	g.GET("/deliveries", w.listDeliveries, admin)
	g.GET("/deliveries/:id", w.getDelivery, admin)
	g.POST("/deliveries/:id/retry", w.retryDelivery, admin)
	g.POST("/webhooks/stripe", w.receiveStripe)
}

// endpointBody is the body of POST /v1/webhook-endpoints.
type endpointBody struct {
	URL        string       `json:"url" validate:"required,max=2048"`
	EventTypes []event.Type `json:"eventTypes" validate:"max=20"`
}

// createdEndpoint is the answer of POST /v1/webhook-endpoints: the only
// time the secret is shown.
type createdEndpoint struct {
	store.Endpoint
	Secret string `json:"secret"`
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
	created, err := w.deliveries.CreateEndpoint(storeCtx(c), e)
	if err != nil {
		return fieldInvalid(err)
	}
	return c.JSON(http.StatusCreated, createdEndpoint{Endpoint: created, Secret: created.Secret})
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
	return answerList(c, items, next, err)
}

func (w *webhookRoutes) getEndpoint(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	e, err := w.deliveries.GetEndpoint(storeCtx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

// disableBody is the optional body of POST /v1/webhook-endpoints/{id}/disable.
type disableBody struct {
	Reason string `json:"reason" validate:"max=500"`
}

func (w *webhookRoutes) disableEndpoint(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var b disableBody
	if err := w.s.decodeOptional(c, &b); err != nil {
		return err
	}
	if b.Reason == "" {
		b.Reason = "disabled by an operator"
	}
	e, err := w.deliveries.DisableEndpoint(storeCtx(c), id, b.Reason)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, e)
}

func (w *webhookRoutes) listDeliveries(c echo.Context) error {
	p, err := page(c)
	if err != nil {
		return err
	}
	f := store.DeliveryFilter{Status: store.DeliveryStatus(c.QueryParam("status")), EventType: event.Type(c.QueryParam("eventType"))}
	if f.Status != "" && !f.Status.Valid() {
		return Invalid("status", "must be one of pending, in_flight, succeeded, failed, dead")
	}
	if f.EventType != "" && !knownEventType(f.EventType) {
		return Invalid("eventType", "is not a known event type")
	}
	items, next, err := w.deliveries.ListDeliveries(storeCtx(c), f, p)
	return answerList(c, items, next, err)
}

func knownEventType(t event.Type) bool {
	for _, k := range event.Types {
		if k == t {
			return true
		}
	}
	return false
}

func (w *webhookRoutes) getDelivery(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	d, err := w.deliveries.GetDelivery(storeCtx(c), id)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

func (w *webhookRoutes) retryDelivery(c echo.Context) error {
	id, err := pathParam(c, "id")
	if err != nil {
		return err
	}
	var b emptyBody
	if err := w.s.decodeOptional(c, &b); err != nil {
		return err
	}
	d, err := webhook.Retry(storeCtx(c), w.deliveries, id)
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Kind: problem.Conflict,
			Detail: "only a failed or dead delivery can be retried", Err: err}
	}
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, d)
}

// stripeKinds maps the statuses webhook.Stripe answers to problem kinds.
var stripeKinds = map[int]problem.Kind{
	http.StatusBadRequest:         problem.InvalidRequest,
	http.StatusConflict:           problem.Conflict,
	http.StatusServiceUnavailable: problem.Unavailable,
}

// receiveStripe is POST /v1/webhooks/stripe: authenticated by its
// Stripe-Signature, not by an API key.
func (w *webhookRoutes) receiveStripe(c echo.Context) error {
	body, err := io.ReadAll(io.LimitReader(c.Request().Body, maxStripeBody+1))
	if err != nil {
		return Invalid("", "the body could not be read")
	}
	if len(body) > maxStripeBody {
		return tooLarge(maxStripeBody)
	}
	if w.stripe.Sign == nil && w.stripe.Secret != "" {
		return &Error{Status: http.StatusServiceUnavailable, Kind: problem.Unavailable,
			Detail: "receipt signing is not configured (no signing key)"}
	}
	status, err := w.stripe.Handle(storeCtx(c), body, c.Request().Header.Get("Stripe-Signature"))
	if status == http.StatusOK {
		return c.JSON(http.StatusOK, map[string]bool{"received": true})
	}
	kind, ok := stripeKinds[status]
	if !ok {
		return &Error{Status: http.StatusInternalServerError, Kind: problem.Internal, Detail: "internal error", Err: err}
	}
	detail := "the Stripe event was not applied"
	if status == http.StatusBadRequest || status == http.StatusServiceUnavailable {
		detail = err.Error()
	}
	return &Error{Status: status, Kind: kind, Detail: detail, Err: err}
}
