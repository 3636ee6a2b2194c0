package api

import (
	"net/http"
	"reflect"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func (s *Server) registerLimits(g group) {
	g.add(http.MethodPatch, "/entitlements/:id", s.updateEntitlement, s.auth(apikey.RoleAdmin))
	g.PUT("/accounts/:agentId/limits", s.putAccountLimits, s.auth(apikey.RoleAdmin))
}

// patchable names the members PATCH /v1/entitlements/{id} changes.
const patchable = "limits, alerts, metadata and expiresAt"

// entitlementPatch is the body of PATCH /v1/entitlements/{id}: absent
// members stay as they are, null removes one (limits: every limit; alerts:
// every alert; metadata: all of it; expiresAt: the expiry).
type entitlementPatch struct {
	Limits    nullable[limitsBody]
	Alerts    nullable[[]alertBody]
	Metadata  nullable[map[string]string]
	ExpiresAt nullable[time.Time]
	// others are the members given that PATCH does not change, in order.
	others []string
}

// UnmarshalJSONFrom reads the patch strictly, as DecodeJSON reads every
// body, but collects the members it does not change instead of stopping at
// the first, so the answer names them all.
func (p *entitlementPatch) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return decodeMembers(dec, reflect.TypeFor[entitlementPatch](), map[string]func() error{
		"limits":    func() error { return decodeNullable(dec, &p.Limits) },
		"alerts":    func() error { return decodeNullable(dec, &p.Alerts) },
		"metadata":  func() error { return decodeNullable(dec, &p.Metadata) },
		"expiresAt": func() error { return decodeNullable(dec, &p.ExpiresAt) },
	}, func(name string) error {
		p.others = append(p.others, name)
		return dec.SkipValue()
	})
}

// Validate refuses the members PATCH does not change, naming each.
func (p *entitlementPatch) Validate() error {
	if len(p.others) > 0 {
		detail := "cannot be changed: PATCH changes only " + patchable
		out := &Error{Status: http.StatusBadRequest, Kind: problem.InvalidRequest}
		for _, name := range p.others {
			out.Errors = append(out.Errors, problem.FieldError{Field: name, Detail: detail})
		}
		out.Detail = "the request is invalid: " + joinField(p.others[0], detail)
		return out
	}
	if !p.Limits.Null {
		return p.Limits.V.validate()
	}
	return nil
}

// update is the patch as a domain update.
func (p *entitlementPatch) update() entitlement.Update {
	var u entitlement.Update
	switch {
	case p.Limits.Null:
		removeAllLimits(&u)
		controls(&u, nil, p.Alerts)
	case p.Limits.Set:
		controls(&u, &p.Limits.V, p.Alerts)
	default:
		controls(&u, nil, p.Alerts)
	}
	if p.Metadata.Set {
		u.Metadata = &entitlement.Set[map[string]string]{To: p.Metadata.V}
	}
	u.ExpiresAt = expiry(p.ExpiresAt)
	return u
}

// updateEntitlement is PATCH /v1/entitlements/{id} (admin): 200 with the
// entitlement as changed, 404 for an unknown one, 400 naming the field for
// a change its rules refuse or a member it does not change.
func (s *Server) updateEntitlement(c echo.Context) error {
	id, b, err := withBody[entitlementPatch](c, idParam, s.decode)
	if err != nil {
		return err
	}
	e, err := s.store.UpdateEntitlement(storeCtx(c), id, b.update())
	if store.CodeOf(err) == store.CodeInvalid {
		return fieldErrorOf(err)
	}
	return answer(c, http.StatusOK, e, err)
}
