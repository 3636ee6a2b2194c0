package api_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/webhook"
)

// shownEndpoint is an endpoint as the API answers it.
type shownEndpoint struct {
	ID, URL, Secret         string
	EventTypes              []string
	Disabled                bool
	DisabledReason          string
	PreviousSecretExpiresAt *time.Time
}

// createEndpoint registers url for every event type.
func (e *env) createEndpoint(url string) shownEndpoint {
	e.t.Helper()
	var ep shownEndpoint
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: e.keys.Admin,
		Body: map[string]any{"url": url}}).decode(e.t, &ep)
	return ep
}

// wantFieldSaying checks that a 400 names field and, if want is not empty, says want.
func wantFieldSaying(t *testing.T, r response, field, want string) {
	t.Helper()
	p := r.problem(t)
	if r.Status != http.StatusBadRequest || len(p.Errors) == 0 || p.Errors[0].Field != field {
		t.Errorf("status %d, errors %+v; want 400 naming %q", r.Status, p.Errors, field)
		return
	}
	if !strings.Contains(p.Errors[0].Detail, want) {
		t.Errorf("error on %s = %q, want it to say %q", field, p.Errors[0].Detail, want)
	}
}

func TestWebhooks_UpdateEndpoint(t *testing.T) {
	e := newWebhookEnv(t)
	admin := e.keys.Admin
	ep := e.createEndpoint("https://hooks.example/a")
	path := "/v1/webhook-endpoints/" + ep.ID
	patch := func(body any) shownEndpoint {
		t.Helper()
		var got shownEndpoint
		e.must(http.StatusOK, req{Method: "PATCH", Path: path, Key: admin, Body: body}).decode(t, &got)
		return got
	}
	if got := patch(map[string]any{"url": "https://hooks.example/b", "eventTypes": []string{"payment.failed"}}); got.URL != "https://hooks.example/b" ||
		len(got.EventTypes) != 1 || got.EventTypes[0] != "payment.failed" || got.Secret != "" {
		t.Errorf("PATCH url and eventTypes = %+v; want the new url, [payment.failed], no secret shown", got)
	}
	if got := patch(map[string]any{"eventTypes": []string{}}); got.URL != "https://hooks.example/b" || len(got.EventTypes) != 0 {
		t.Errorf("PATCH eventTypes [] = %+v; want the url kept and every event type", got)
	}
	for _, unchanged := range []string{`{}`, `{"url":null,"eventTypes":null,"disabled":null}`} {
		if got := patch(unchanged); got.URL != "https://hooks.example/b" || len(got.EventTypes) != 0 || got.Disabled {
			t.Errorf("PATCH %s = %+v; want the endpoint unchanged", unchanged, got)
		}
	}

	// Enabled again after it was disabled (a 410 Gone does the same).
	e.must(http.StatusOK, req{Method: "POST", Path: path + "/disable", Key: admin, Body: map[string]any{"reason": "the receiver answered 410 Gone"}})
	if got := patch(map[string]any{"disabled": false}); got.Disabled || got.DisabledReason != "" {
		t.Errorf(`PATCH {"disabled": false} = disabled %v (%q); want enabled`, got.Disabled, got.DisabledReason)
	}

	tooMany := make([]string, 21)
	for i := range tooMany {
		tooMany[i] = string(event.PaymentSucceeded)
	}
	for _, tc := range []struct {
		body         any
		field, reads string
	}{
		{`{"url":"ftp://hooks.example/"}`, "url", "http or https"},
		{`{"url":"https://hooks.example:70000/"}`, "url", "out of range"},
		{`{"url":"https://hooks.example:0/"}`, "url", "out of range"},
		{`{"url":"http://169.254.169.254/latest/meta-data/"}`, "url", "link-local"},
		{`{"url":"https://localhost:8443/"}`, "url", "localhost"},
		{`{"url":5}`, "url", "string"},
		{`{"eventTypes":["payment.succeeded","nope"]}`, "eventTypes[1]", "unknown event type"},
		{map[string]any{"eventTypes": tooMany}, "eventTypes", "at most 20"},
		{`{"disabled":true}`, "disabled", "/disable"},
		{`{"secret":"whsec_mine"}`, "secret", ""},
	} {
		t.Run(fmt.Sprint(tc.body), func(t *testing.T) {
			wantFieldSaying(t, e.with(t).do(req{Method: "PATCH", Path: path, Key: admin, Body: tc.body}), tc.field, tc.reads)
		})
	}
	var got shownEndpoint
	e.must(http.StatusOK, req{Method: "GET", Path: path, Key: admin}).decode(t, &got)
	if got.URL != "https://hooks.example/b" || len(got.EventTypes) != 0 || got.Disabled {
		t.Errorf("endpoint after refused updates = %+v; want it as last updated", got)
	}
	e.must(http.StatusNotFound, req{Method: "PATCH", Path: "/v1/webhook-endpoints/nope", Key: admin, Body: `{"eventTypes":[]}`})
	e.must(http.StatusForbidden, req{Method: "PATCH", Path: path, Key: e.keys.Billing, Body: `{}`})
}

// TestWebhooks_DeleteEndpoint: a deleted endpoint is gone (404, a repeated
// delete included); its deliveries stay listed.
func TestWebhooks_DeleteEndpoint(t *testing.T) {
	e := newWebhookEnv(t)
	admin := e.keys.Admin
	ep := e.createEndpoint("https://hooks.example/gone")
	ds := e.store.(store.DeliveryStore)
	d, _, err := ds.EnqueueDelivery(context.Background(), store.Delivery{ID: "d-gone", Key: "k-gone", EndpointID: ep.ID,
		EventID: "ev-gone", EventType: event.PaymentSucceeded, Payload: []byte(`{}`)})
	if err != nil {
		t.Fatalf("EnqueueDelivery: %v", err)
	}
	path := "/v1/webhook-endpoints/" + ep.ID
	e.must(http.StatusForbidden, req{Method: "DELETE", Path: path, Key: e.keys.Billing})
	res := e.must(http.StatusNoContent, req{Method: "DELETE", Path: path, Key: admin})
	if len(res.Body) != 0 {
		t.Errorf("DELETE body = %q, want none", res.Body)
	}
	e.must(http.StatusNotFound, req{Method: "GET", Path: path, Key: admin})
	e.must(http.StatusNotFound, req{Method: "DELETE", Path: path, Key: admin})
	e.must(http.StatusNotFound, req{Method: "POST", Path: path + "/rotate-secret", Key: admin})
	var kept store.Delivery
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/deliveries/" + d.ID, Key: admin}).decode(t, &kept)
	if kept.Status != store.DeliveryPending || kept.EndpointID != ep.ID {
		t.Errorf("delivery of the deleted endpoint = %s to %s; want it kept, pending (the dispatcher fails it)", kept.Status, kept.EndpointID)
	}
}

func TestWebhooks_RotateSecret(t *testing.T) {
	e := newWebhookEnv(t)
	admin := e.keys.Admin
	ds := e.store.(store.DeliveryStore)
	ep := e.createEndpoint("https://hooks.example/rotating")
	path := "/v1/webhook-endpoints/" + ep.ID
	rotate := func(body any, key string) response {
		t.Helper()
		return e.must(http.StatusOK, req{Method: "POST", Path: path + "/rotate-secret", Key: admin, Body: body,
			Header: map[string]string{"Idempotency-Key": key}})
	}

	var got shownEndpoint
	res := rotate(nil, "rotate-1")
	res.decode(t, &got)
	wantUntil := e.clock.Now().Add(24 * time.Hour)
	if !strings.HasPrefix(got.Secret, "whsec_") || got.Secret == ep.Secret || got.PreviousSecretExpiresAt == nil ||
		!got.PreviousSecretExpiresAt.Equal(wantUntil) {
		t.Fatalf("rotation = secret %q (was %q), previous until %v; want a new whsec_ secret, the old one until %v",
			got.Secret, ep.Secret, got.PreviousSecretExpiresAt, wantUntil)
	}
	stored, err := ds.GetEndpoint(context.Background(), ep.ID)
	if err != nil || stored.Secret != got.Secret || stored.PreviousSecret != ep.Secret {
		t.Errorf("stored after the rotation: secret %q, previous %q, %v; want %q and %q", stored.Secret, stored.PreviousSecret, err, got.Secret, ep.Secret)
	}
	// The ledger replays the answer, new secret included, to a retry.
	replay := rotate(nil, "rotate-1")
	if replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Body) != string(res.Body) {
		t.Errorf("retried rotation: replayed %q, body %s; want the first answer replayed", replay.Header.Get("Idempotent-Replayed"), replay.Body)
	}
	// Reads show the end of the grace period, never a secret.
	get := e.must(http.StatusOK, req{Method: "GET", Path: path, Key: admin})
	if strings.Contains(string(get.Body), "whsec_") || !strings.Contains(string(get.Body), `"previousSecretExpiresAt"`) {
		t.Errorf("GET during the grace period = %s; want previousSecretExpiresAt and no secret", get.Body)
	}
	e.clock.Advance(24 * time.Hour)
	if get := e.must(http.StatusOK, req{Method: "GET", Path: path, Key: admin}); strings.Contains(string(get.Body), "previousSecretExpiresAt") {
		t.Errorf("GET after the grace period = %s; want no previousSecretExpiresAt", get.Body)
	}

	got = shownEndpoint{}
	rotate(map[string]any{"gracePeriodSeconds": 0}, "rotate-2").decode(t, &got)
	if got.PreviousSecretExpiresAt != nil {
		t.Errorf("rotation with gracePeriodSeconds 0: previous until %v, want none", got.PreviousSecretExpiresAt)
	}
	if stored, _ := ds.GetEndpoint(context.Background(), ep.ID); stored.PreviousSecret != "" {
		t.Errorf("rotation with gracePeriodSeconds 0 kept the previous secret")
	}
	got = shownEndpoint{}
	rotate(map[string]any{"gracePeriodSeconds": 7 * 24 * 3600}, "rotate-3").decode(t, &got)
	if want := e.clock.Now().Add(7 * 24 * time.Hour); got.PreviousSecretExpiresAt == nil || !got.PreviousSecretExpiresAt.Equal(want) {
		t.Errorf("rotation with the longest grace period: previous until %v, want %v", got.PreviousSecretExpiresAt, want)
	}
	// null is documented as the default, as an absent member is.
	got = shownEndpoint{}
	rotate(map[string]any{"gracePeriodSeconds": nil}, "rotate-4").decode(t, &got)
	if want := e.clock.Now().Add(webhook.DefaultSecretGrace); got.PreviousSecretExpiresAt == nil || !got.PreviousSecretExpiresAt.Equal(want) {
		t.Errorf("rotation with gracePeriodSeconds null: previous until %v, want %v (the default)", got.PreviousSecretExpiresAt, want)
	}
	for _, body := range []string{`{"gracePeriodSeconds":-1}`, `{"gracePeriodSeconds":604801}`, `{"gracePeriodSeconds":"1h"}`, `{"gracePeriodSeconds":1.5}`} {
		res := e.do(req{Method: "POST", Path: path + "/rotate-secret", Key: admin, Body: body})
		wantFieldSaying(t, res, "gracePeriodSeconds", "")
	}
	wantFieldSaying(t, e.do(req{Method: "POST", Path: path + "/rotate-secret", Key: admin, Body: `{"grace":1}`}), "grace", "")
	e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/webhook-endpoints/nope/rotate-secret", Key: admin})
	e.must(http.StatusForbidden, req{Method: "POST", Path: path + "/rotate-secret", Key: e.keys.Billing})
}

// TestWebhooks_PrivateTargetsRefused: without AllowPrivate, registration
// and update refuse private targets with a 400 naming url and saying why;
// with it, they are accepted.
func TestWebhooks_PrivateTargetsRefused(t *testing.T) {
	e := newWebhookEnv(t)
	admin := e.keys.Admin
	ep := e.createEndpoint("https://hooks.example/public")
	for _, tc := range []struct{ url, reads string }{
		{"http://127.0.0.1:8080/hooks", "loopback"},
		{"http://[::1]/", "loopback"},
		{"http://169.254.169.254/latest/meta-data/", "link-local"},
		{"http://10.0.0.1/", "private"},
		{"http://192.168.1.20/", "private"},
		{"http://172.16.0.1/", "private"},
		{"http://[fc00::1]/", "private"},
		{"http://[fe80::1]/", "link-local"},
		{"http://localhost:3000/", "localhost"},
		{"http://api.localhost/", "localhost"},
		{"http://127.1/", "number"},
		{"https://hooks.example:65536/", "out of range"},
		{"https://hooks.example:0/", "out of range"},
		{"gopher://hooks.example/", "http or https"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			e := e.with(t)
			wantFieldSaying(t, e.do(req{Method: "POST", Path: "/v1/webhook-endpoints", Key: admin, Body: map[string]any{"url": tc.url}}), "url", tc.reads)
			wantFieldSaying(t, e.do(req{Method: "PATCH", Path: "/v1/webhook-endpoints/" + ep.ID, Key: admin, Body: map[string]any{"url": tc.url}}), "url", tc.reads)
		})
	}
	var list api.List[store.Endpoint]
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/webhook-endpoints", Key: admin}).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].URL != "https://hooks.example/public" {
		t.Errorf("endpoints after the refusals = %+v, want only the public one, unchanged", list.Items)
	}

	dev := newEnv(t, func(c *api.Config) { c.Webhooks.AllowPrivate = true })
	local := dev.createEndpoint("http://127.0.0.1:8080/hooks")
	dev.must(http.StatusOK, req{Method: "PATCH", Path: "/v1/webhook-endpoints/" + local.ID, Key: dev.keys.Admin, Body: map[string]any{"url": "http://localhost:9000/"}})
	wantFieldSaying(t, dev.do(req{Method: "POST", Path: "/v1/webhook-endpoints", Key: dev.keys.Admin, Body: map[string]any{"url": "http://127.0.0.1:99999/"}}), "url", "out of range")
}
