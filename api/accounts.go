package api

import (
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

func (s *Server) registerAccounts(g group) {
	readers := s.auth(apikey.RoleBilling, apikey.RoleReader)
	g.PUT("/accounts/:agentId", s.putAccount, s.auth(apikey.RoleBilling))
	g.GET("/accounts/:agentId", getBy(agentParam, s.store.GetAccount), readers)
	g.POST("/accounts/:agentId/entitlements", s.grantEntitlement, s.auth(apikey.RoleAdmin))
	g.GET("/accounts/:agentId/entitlements", s.listEntitlements, readers)
	g.GET("/accounts/:agentId/consumptions", s.listConsumptions, readers)
	g.GET("/entitlements/:id", s.getEntitlement, readers)
	g.POST("/entitlements/:id/revoke", s.revokeEntitlement, s.auth(apikey.RoleAdmin))
}

// agentParam returns the :agentId path parameter, unescaped and checked.
func agentParam(c echo.Context) (string, error) {
	return pathParam(c, "agentId")
}

// pathParam returns the path parameter name, unescaped and checked.
func pathParam(c echo.Context, name string) (string, error) {
	v, err := paramValue(c, name)
	if err != nil || !entitlement.ValidName(v) {
		return "", Invalid(name, "must be 1–200 printable ASCII characters")
	}
	return v, nil
}

// paramValue returns the path parameter name unescaped exactly once. Echo
// matches routes on the request's RawPath when the URL has one (the path
// holds escapes such as %2F that its decoded form cannot show) and on the
// decoded Path otherwise, so a parameter is still escaped only in the first
// case. Unescaping it in the second too would turn "a%2562" (the agent
// "a%62") into "ab". Authorization and handlers both read parameters here,
// so they always agree on which agent a request is about.
func paramValue(c echo.Context, name string) (string, error) {
	v := c.Param(name)
	if c.Request().URL.RawPath == "" {
		return v, nil
	}
	return url.PathUnescape(v)
}

// accountBody is the body of PUT /v1/accounts/{agentId}.
type accountBody struct {
	// Kind is set when the account is made (absent: an agent) and never
	// changes: absent keeps the stored kind, another is a 409 naming kind.
	Kind        entitlement.AccountKind `json:"kind"`
	DisplayName string                  `json:"displayName" validate:"max=200"`
	Metadata    map[string]string       `json:"metadata"`
}

// Validate checks the kind and the metadata bounds.
func (b *accountBody) Validate() error {
	if !b.Kind.Valid() {
		return Invalid("kind", "must be agent or wallet")
	}
	return entitlement.ValidateMetadata("metadata", b.Metadata)
}

func (s *Server) putAccount(c echo.Context) error {
	agent, b, err := withBody[accountBody](c, agentParam, s.decodeOptional)
	if err != nil {
		return err
	}
	a, err := s.store.UpsertAccount(storeCtx(c), entitlement.Account{
		AgentID: agent, Kind: b.Kind, DisplayName: b.DisplayName, Metadata: b.Metadata,
	})
	if store.CodeOf(err) == store.CodeConflict {
		return &Error{Status: http.StatusConflict, Kind: problem.Conflict, Detail: "kind: " + messageOf(err),
			Errors: []problem.FieldError{{Field: "kind", Detail: "the account's kind never changes"}}}
	}
	return answer(c, http.StatusOK, a, err)
}

// entitlementBody is the body of POST /v1/accounts/{agentId}/entitlements:
// a grant plus, for credits, its balance, and metadata.
type entitlementBody struct {
	grantBody
	Balance  *money.Money      `json:"balance"`
	Metadata map[string]string `json:"metadata"`
	// Limits and Alerts are the spend controls and low-balance alerts
	// (limits_body.go), checked against the entitlement once it is made.
	Limits *limitsBody `json:"limits"`
	Alerts []alertBody `json:"alerts"`
}

// Validate checks the rules across fields.
func (b *entitlementBody) Validate() error {
	if err := b.validate(""); err != nil {
		return err
	}
	switch {
	case b.Type == entitlement.TypeCredits && b.Balance == nil:
		return Invalid("balance", "is required for credits")
	case b.Type != entitlement.TypeCredits && b.Balance != nil:
		return Invalid("balance", "is only for credits")
	case b.Balance != nil && b.Balance.Cents <= 0:
		return Invalid("balance.cents", "must be positive")
	}
	if err := b.Limits.validate(); err != nil {
		return err
	}
	return entitlement.ValidateMetadata("metadata", b.Metadata)
}

func (s *Server) grantEntitlement(c echo.Context) error {
	agent, b, err := withBody[entitlementBody](c, agentParam, s.decode)
	if err != nil {
		return err
	}
	now := s.now().UTC()
	if err := b.ahead("", now); err != nil {
		return err
	}
	p := payment.Payment{AgentID: agent}
	if b.Balance != nil {
		p.Amount = *b.Balance
	}
	e := b.template().Entitlement(uuid.NewString(), &p, now)
	e.Metadata = b.Metadata
	var u entitlement.Update
	controls(&u, b.Limits, nullable[[]alertBody]{Set: b.Alerts != nil, V: b.Alerts})
	if err := e.Apply(u, now); err != nil {
		return fieldErrorOf(err)
	}
	out, err := s.store.CreateEntitlement(storeCtx(c), e)
	return answer(c, http.StatusCreated, out, err)
}

func (s *Server) listEntitlements(c echo.Context) error {
	agent, p, err := agentPage(c)
	if err != nil {
		return err
	}
	f := store.EntitlementFilter{
		Status:  entitlement.Status(c.QueryParam("status")),
		Service: c.QueryParam("service"),
		Type:    entitlement.Type(c.QueryParam("type")),
	}
	switch {
	case f.Status != "" && !f.Status.Valid():
		return Invalid("status", "must be active or revoked")
	case f.Type != "" && !f.Type.Valid():
		return Invalid("type", "must be credits, quota or subscription")
	case f.Service != "" && !entitlement.ValidName(f.Service):
		return Invalid("service", "must be 1–200 printable ASCII characters")
	}
	items, next, err := s.store.ListEntitlements(storeCtx(c), agent, f, p)
	return answerList(c, items, next, err)
}

func (s *Server) listConsumptions(c echo.Context) error {
	agent, p, err := agentPage(c)
	if err != nil {
		return err
	}
	var since time.Time
	if v := c.QueryParam("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return Invalid("since", "must be an RFC 3339 date-time")
		}
		if !entitlement.ValidInstant(since) {
			return Invalid("since", "must be within the years 0001–9999 in UTC")
		}
	}
	items, next, err := s.store.ListConsumptions(storeCtx(c), agent, since, p)
	return answerList(c, items, next, err)
}

func (s *Server) getEntitlement(c echo.Context) error {
	return getOwned(c, "entitlement", s.store.GetEntitlement, func(e *entitlement.Entitlement) string { return e.AgentID })
}

func (s *Server) revokeEntitlement(c echo.Context) error {
	return changeByID(s, c, s.store.RevokeEntitlement)
}
