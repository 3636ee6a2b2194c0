package api

import (
	"errors"
	"net/http"
	"reflect"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/labstack/echo/v4"

	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/store"
)

// registerWallets routes the members of shared wallets (docs/api.md,
// "Shared wallets"): admin keys add, change and remove them; readers of the
// wallet list and read them; readers of an agent list the wallets it
// belongs to. A wallet is an account of kind wallet (PUT
// /v1/accounts/{id}); its entitlements are granted and read on the account
// routes, as an agent's are.
func (s *Server) registerWallets(g group) {
	readers, admin := s.auth(apikey.RoleBilling, apikey.RoleReader), s.auth(apikey.RoleAdmin)
	g.POST("/wallets/:walletId/members", s.addMember, admin)
	g.GET("/wallets/:walletId/members", s.listMembers, readers)
	g.GET("/wallets/:walletId/members/:memberId", s.getMember, readers)
	g.add(http.MethodPatch, "/wallets/:walletId/members/:memberId", s.updateMember, admin)
	g.add(http.MethodDelete, "/wallets/:walletId/members/:memberId", s.removeMember, admin)
	g.GET("/accounts/:agentId/wallets", s.listAgentWallets, readers)
}

// walletParam returns the :walletId path parameter, unescaped and checked.
func walletParam(c echo.Context) (string, error) { return pathParam(c, "walletId") }

// memberParams returns the :walletId and :memberId path parameters.
func memberParams(c echo.Context) (string, string, error) {
	wallet, err := walletParam(c)
	if err != nil {
		return "", "", err
	}
	member, err := pathParam(c, "memberId")
	return wallet, member, err
}

// capsBody is a member's caps as a request sets them: the same members as
// an entitlement's limits (limitsBody), all given at once (they replace
// the member's caps whole).
type capsBody struct {
	MaxPerCall      *money.Money    `json:"maxPerCall"`
	MaxUnitsPerCall *int64          `json:"maxUnitsPerCall"`
	SpendLimit      *spendLimitBody `json:"spendLimit"`
}

// limits is b as the domain's caps; the membership's rules check them
// (entitlement.Membership.Validate, naming the field under caps).
func (b *capsBody) limits() entitlement.Limits {
	l := entitlement.Limits{MaxPerCall: b.MaxPerCall, MaxUnitsPerCall: b.MaxUnitsPerCall}
	if sl := b.SpendLimit; sl != nil {
		l.Spend.Period = sl.Period
		if sl.Max != nil {
			l.Spend.Max = *sl.Max
		}
		if sl.MaxUnits != nil {
			l.Spend.MaxUnits = *sl.MaxUnits
		}
	}
	return l
}

// validate checks what the domain's rules cannot tell from the caps: a
// spendLimit given as an object names its period.
func (b *capsBody) validate() error {
	if b != nil && b.SpendLimit != nil && b.SpendLimit.Period == "" {
		return Invalid("caps.spendLimit.period", "is required")
	}
	return nil
}

// memberBody is the body of POST /v1/wallets/{walletId}/members.
type memberBody struct {
	MemberID string            `json:"memberId" validate:"required,name"`
	Order    entitlement.Order `json:"order"`
	Caps     *capsBody         `json:"caps"`
}

// Validate checks the order and the caps' spend limit.
func (b *memberBody) Validate() error {
	if b.Order != "" && !b.Order.Valid() {
		return Invalid("order", "must be own_first or wallet_first")
	}
	return b.Caps.validate()
}

// membership is the body as a membership of wallet, for AddMember.
func (b *memberBody) membership(wallet string) entitlement.Membership {
	m := entitlement.Membership{WalletID: wallet, MemberID: b.MemberID, Order: b.Order}
	if b.Caps != nil {
		m.Caps = b.Caps.limits()
	}
	return m
}

// addMember is POST /v1/wallets/{walletId}/members (admin, behind the
// idempotency ledger): 201 with the membership.
func (s *Server) addMember(c echo.Context) error {
	wallet, err := walletParam(c)
	if err != nil {
		return err
	}
	// The ledger checks the key first; this route needs one even without a ledger.
	_, b, err := withBody[memberBody](c, idempotencyKey, s.decode)
	if err != nil {
		return err
	}
	m, err := s.store.AddMember(storeCtx(c), b.membership(wallet))
	return answer(c, http.StatusCreated, m, memberError(err, "walletId"))
}

// memberPatch is the body of PATCH /v1/wallets/{walletId}/members/{memberId}:
// absent members stay as they are; caps replace the caps whole, null
// removes them all.
type memberPatch struct {
	Order *entitlement.Order
	Caps  nullable[capsBody]
}

// UnmarshalJSONFrom reads the members order and caps (possibly null).
func (p *memberPatch) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return decodeMembers(dec, reflect.TypeFor[memberPatch](), map[string]func() error{
		"order": func() error { p.Order = new(entitlement.Order); return json.UnmarshalDecode(dec, p.Order) },
		"caps":  func() error { return decodeNullable(dec, &p.Caps) },
	}, nil)
}

// Validate checks the order and the caps' spend limit.
func (p *memberPatch) Validate() error {
	if p.Order != nil && !p.Order.Valid() {
		return Invalid("order", "must be own_first or wallet_first")
	}
	if p.Caps.Set && !p.Caps.Null {
		return p.Caps.V.validate()
	}
	return nil
}

// update is the patch as the store's update.
func (p *memberPatch) update() store.MemberUpdate {
	u := store.MemberUpdate{Order: p.Order}
	if p.Caps.Set {
		var l entitlement.Limits
		if !p.Caps.Null {
			l = p.Caps.V.limits()
		}
		u.Caps = &l
	}
	return u
}

// updateMember is PATCH /v1/wallets/{walletId}/members/{memberId} (admin).
func (s *Server) updateMember(c echo.Context) error {
	wallet, member, err := memberParams(c)
	if err != nil {
		return err
	}
	var p memberPatch
	if err := s.decode(c, &p); err != nil {
		return err
	}
	m, err := s.store.UpdateMember(storeCtx(c), wallet, member, p.update())
	return answer(c, http.StatusOK, m, memberError(err, "memberId"))
}

// removeMember is DELETE /v1/wallets/{walletId}/members/{memberId} (admin):
// 200 with the membership as it was; the member's calls stop spending the
// wallet at once.
func (s *Server) removeMember(c echo.Context) error {
	wallet, member, err := memberParams(c)
	if err != nil {
		return err
	}
	if err := s.decodeOptional(c, &emptyBody{}); err != nil {
		return err
	}
	m, err := s.store.RemoveMember(storeCtx(c), wallet, member)
	return answer(c, http.StatusOK, m, memberError(err, "memberId"))
}

// getMember is GET /v1/wallets/{walletId}/members/{memberId}.
func (s *Server) getMember(c echo.Context) error {
	wallet, member, err := memberParams(c)
	if err != nil {
		return err
	}
	m, err := s.store.GetMember(storeCtx(c), wallet, member)
	return answer(c, http.StatusOK, m, memberError(err, "memberId"))
}

// listMembers is GET /v1/wallets/{walletId}/members: one page of the
// wallet's memberships by member ID; 404 when the account is no wallet.
func (s *Server) listMembers(c echo.Context) error {
	wallet, err := walletParam(c)
	if err != nil {
		return err
	}
	p, err := page(c)
	if err != nil {
		return err
	}
	a, err := s.store.GetAccount(storeCtx(c), wallet)
	switch {
	case errors.Is(err, store.ErrNotFound) || err == nil && !a.IsWallet():
		return notAWallet()
	case err != nil:
		return err
	}
	items, next, err := s.store.ListMembers(storeCtx(c), wallet, p)
	return answerList(c, items, next, err)
}

// notAWallet is the 404 of a wallet route whose walletId is no wallet.
func notAWallet() *Error {
	e := NotFound("wallet not found: no account of kind wallet has this ID")
	e.Errors = []problem.FieldError{{Field: "walletId", Detail: "is no wallet"}}
	return e
}

// memberError explains the store's refusals of a membership call: Invalid
// names the field its rule named, NotFound names missing (walletId when
// adding a member: no such wallet; memberId otherwise: no such
// membership), Conflict names the member that is one already.
func memberError(err error, missing string) error {
	switch store.CodeOf(err) {
	case "":
		return err
	case store.CodeInvalid:
		return fieldErrorOf(err)
	case store.CodeNotFound:
		e := NotFound(messageOf(err))
		e.Errors = []problem.FieldError{{Field: missing, Detail: "not found"}}
		return e
	case store.CodeConflict:
		return &Error{Status: http.StatusConflict, Kind: problem.Conflict, Detail: messageOf(err),
			Errors: []problem.FieldError{{Field: "memberId", Detail: "is a member of this wallet already"}}}
	}
	return err
}

// walletMembership is one item of GET /v1/accounts/{agentId}/wallets: the
// membership, what the wallet can spend now, and what the member's spend
// limit in it leaves (capRoom, absent without a spend limit).
type walletMembership struct {
	entitlement.Membership
	Balance entitlement.Balance `json:"balance"`
	CapRoom *capRoom            `json:"capRoom,omitempty"`
}

// capRoom is what a member's spend limit in a wallet leaves it in the
// current period: Amount (a money limit) and Units (a units limit), until
// ResetAt.
type capRoom struct {
	Amount  *money.Money `json:"amount,omitempty"`
	Units   *int64       `json:"units,omitempty"`
	ResetAt time.Time    `json:"resetAt"`
}

// roomOf is what m's spend limit leaves at now (entitlement.Membership.Room,
// never below zero), nil without one.
func roomOf(m entitlement.Membership, now time.Time) *capRoom {
	m = m.Clone()
	m.Refresh(now) // the period's lazy reset, for its ResetAt
	s := &m.Caps.Spend
	if s.Period == "" {
		return nil
	}
	r := &capRoom{ResetAt: s.ResetAt}
	if cents, ok := m.Room(now, entitlement.TypeCredits); ok {
		r.Amount = &money.Money{Cents: max(cents, 0), Currency: s.Max.Currency}
	}
	if units, ok := m.Room(now, entitlement.TypeQuota); ok {
		units = max(units, 0)
		r.Units = &units
	}
	return r
}

// listAgentWallets is GET /v1/accounts/{agentId}/wallets: one page of the
// agent's memberships by wallet ID, each with the wallet's balance and the
// room the member's spend limit leaves it.
func (s *Server) listAgentWallets(c echo.Context) error {
	agent, p, err := agentPage(c)
	if err != nil {
		return err
	}
	ms, next, err := s.store.ListWallets(storeCtx(c), agent, p)
	if err != nil {
		return answerList[walletMembership](c, nil, "", err)
	}
	now := s.now()
	items := make([]walletMembership, len(ms))
	for i, m := range ms {
		b, err := s.store.Balance(storeCtx(c), m.WalletID)
		if err != nil {
			return err
		}
		items[i] = walletMembership{Membership: m, Balance: b, CapRoom: roomOf(m, now)}
	}
	return answerList(c, items, next, nil)
}
