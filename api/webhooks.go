package api

import (
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// WebhookConfig enables the webhook routes: webhook endpoints
// (webhook_endpoints.go) and deliveries (admin) and the Stripe event
// receiver (Stripe signature).
type WebhookConfig struct {
	// Deliveries holds endpoints and deliveries; nil uses Config.Store,
	// which then must implement store.DeliveryStore (both stores do).
	Deliveries store.DeliveryStore
	// StripeSecret verifies Stripe-Signature; empty refuses every Stripe
	// event with 503 (Stripe retries until it is configured).
	StripeSecret string
	// AllowPrivate lets endpoints on loopback and private targets be
	// registered; without it, webhook.CheckTarget refuses them (400 naming
	// url). The dispatcher's webhook.Config.AllowPrivate should agree.
	AllowPrivate bool
}

// maxStripeBody bounds a Stripe event body (Stripe's events are far smaller).
const maxStripeBody = 512 << 10

// webhookRoutes serves the routes of WebhookConfig.
type webhookRoutes struct {
	s            *Server
	deliveries   store.DeliveryStore
	stripe       *webhook.Stripe
	allowPrivate bool
}

// registerWebhooks adds the webhook routes when cfg is set.
func (s *Server) registerWebhooks(cfg *WebhookConfig) {
	if cfg == nil {
		return
	}
	w := &webhookRoutes{s: s, deliveries: cfg.Deliveries, allowPrivate: cfg.AllowPrivate}
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
	g := group{s: s, prefix: "/v1"}
	admin := s.auth(apikey.RoleAdmin)
	g.POST("/webhook-endpoints", w.createEndpoint, admin)
	g.GET("/webhook-endpoints", w.listEndpoints, admin)
	g.GET("/webhook-endpoints/:id", w.getEndpoint, admin)
	g.PATCH("/webhook-endpoints/:id", w.updateEndpoint, admin)
	g.DELETE("/webhook-endpoints/:id", w.deleteEndpoint, admin)
	g.POST("/webhook-endpoints/:id/disable", w.disableEndpoint, admin)
	g.POST("/webhook-endpoints/:id/rotate-secret", w.rotateSecret, admin)
	g.GET("/deliveries", w.listDeliveries, admin)
	g.GET("/deliveries/:id", getBy(idParam, w.deliveries.GetDelivery), admin)
	g.POST("/deliveries/:id/retry", w.retryDelivery, admin)
	g.POST("/webhooks/stripe", w.receiveStripe)
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

func (w *webhookRoutes) retryDelivery(c echo.Context) error {
	id, _, err := withBody[emptyBody](c, idParam, w.s.decodeOptional)
	if err != nil {
		return err
	}
	d, err := webhook.Retry(storeCtx(c), w.deliveries, id)
	if errors.Is(err, store.ErrConflict) {
		return &Error{Status: http.StatusConflict, Kind: problem.Conflict,
			Detail: "only a failed or dead delivery can be retried", Err: err}
	}
	return answer(c, http.StatusOK, d, err)
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
