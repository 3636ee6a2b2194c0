package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/problem"
	"github.com/stipend-mcp/stipend/usage"
)

// walletW is the wallet of the route table's fixtures; the reader key may
// read it, and agentA is one of its members.
const walletW = "wallet-w"

// makeWallet creates the wallet account id with the billing key.
func (e *env) makeWallet(id string) {
	e.t.Helper()
	var a entitlement.Account
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + id, Key: e.keys.Billing, Body: map[string]any{"kind": "wallet"}}).decode(e.t, &a)
	if a.Kind != entitlement.KindWallet {
		e.t.Fatalf("PUT account %s kind wallet: answered kind %q", id, a.Kind)
	}
}

// addMember adds member to wallet with the caps given (nil: none) and
// returns the membership.
func (e *env) addMember(wallet, member string, caps map[string]any) entitlement.Membership {
	e.t.Helper()
	body := map[string]any{"memberId": member}
	if caps != nil {
		body["caps"] = caps
	}
	var m entitlement.Membership
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/wallets/" + wallet + "/members", Key: e.keys.Admin, Body: body}).decode(e.t, &m)
	return m
}

// dailyCap is caps of at most cents USD a day.
func dailyCap(cents int64) map[string]any {
	return map[string]any{"spendLimit": map[string]any{"period": "day", "max": usd(cents)}}
}

// consumeAnswerBody is the 200 body of a consume.
type consumeAnswerBody struct {
	Result      string
	Consumption entitlement.Consumption
}

// TestWallets_Flow is the walk-through of docs/api.md, on every store: a
// wallet funded once, two members with daily caps spending it, one reaching
// its cap while the other spends on, usage by member, the member's view of
// its wallets, a change of caps, a removal that stops the member at once,
// and the events all that wrote.
func TestWallets_Flow(t *testing.T) {
	for _, st := range storeEnvs {
		t.Run(st.name, func(t *testing.T) { walletFlow(t, st.env(t)) })
	}
}

func walletFlow(t *testing.T, e *env) {
	const team, alice, bob = "team-wallet", "agent-alice", "agent-bob"
	e.makeWallet(team)
	ent := e.grantCredits(team, 1000)
	m := e.addMember(team, alice, dailyCap(30))
	if m.WalletID != team || m.MemberID != alice || m.Order != entitlement.OrderOwnFirst || m.Caps.Spend.Max.Cents != 30 {
		t.Fatalf("POST member = %+v, want alice in %s, own_first, 30 USD a day", m, team)
	}
	e.addMember(team, bob, dailyCap(50))

	consume := func(agent, key string, cents int64) response {
		return e.do(req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agent, key, cents)})
	}
	for i, who := range []string{alice, bob, alice} {
		res := consume(who, fmt.Sprint("k", i), 10)
		if res.Status != http.StatusOK {
			t.Fatalf("consume %d by %s: %d %s", i, who, res.Status, res.Body)
		}
		var out consumeAnswerBody
		res.decode(t, &out)
		if c := out.Consumption; c.AgentID != who || c.WalletID != team || c.EntitlementID != ent {
			t.Errorf("consume %d: consumption %+v, want agent %s, wallet %s, entitlement %s", i, c, who, team, ent)
		}
	}
	// Alice has 10 of her 30 left: 11 is refused by her cap, naming her.
	p := consume(alice, "k-over", 11).problem(t)
	want := entitlement.Denial{EntitlementID: ent, Reason: entitlement.ReasonMemberLimit, MemberID: alice, Limit: entitlement.LimitSpend}
	if p.Status != http.StatusPaymentRequired || !slices.Contains(p.Reasons, want) {
		t.Errorf("consume over alice's cap: %d reasons %+v, want 402 with %+v", p.Status, p.Reasons, want)
	}
	// Bob spends on.
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(bob, "k-bob", 40)})
	if got := e.balance(ent); got != 1000-70 {
		t.Errorf("wallet balance = %d, want %d", got, 1000-70)
	}

	// Usage of the wallet by member (the range ends now, excluded).
	e.clock.Advance(time.Minute)
	var page usagePage
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + team + "/usage?groupBy=member", Key: e.keys.Billing}).decode(t, &page)
	spent := map[string]int64{}
	for _, b := range page.Items {
		for _, a := range b.Amounts {
			spent[b.MemberID] += a.Cents
		}
	}
	if page.GroupBy != usage.ByMember || spent[alice] != 20 || spent[bob] != 50 || len(spent) != 2 {
		t.Errorf("usage by member = %s %+v, want alice 20, bob 50", page.GroupBy, spent)
	}
	// The wallet's consumptions are its members'.
	var cs struct{ Items []entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + team + "/consumptions", Key: e.keys.Billing}).decode(t, &cs)
	if len(cs.Items) != 4 {
		t.Errorf("wallet's consumptions: %d, want 4", len(cs.Items))
	}

	// Alice's view of her wallets: the wallet's balance and her room.
	var ws struct {
		Items []struct {
			entitlement.Membership
			Balance entitlement.Balance
			CapRoom *struct {
				Amount  *struct{ Cents int64 }
				ResetAt time.Time
			}
		}
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + alice + "/wallets", Key: e.keys.Billing}).decode(t, &ws)
	if len(ws.Items) != 1 || ws.Items[0].WalletID != team || len(ws.Items[0].Balance.Credits) != 1 ||
		ws.Items[0].Balance.Credits[0].Available.Cents != 930 || ws.Items[0].CapRoom == nil || ws.Items[0].CapRoom.Amount.Cents != 10 {
		t.Errorf("alice's wallets = %+v, want %s with 930 available and 10 of room", ws.Items, team)
	}

	// A higher cap lets alice spend again; the day's spend is kept.
	var changed entitlement.Membership
	e.must(http.StatusOK, req{Method: "PATCH", Path: "/v1/wallets/" + team + "/members/" + alice, Key: e.keys.Admin,
		Body: map[string]any{"caps": dailyCap(100)}}).decode(t, &changed)
	if changed.Caps.Spend.Max.Cents != 100 || changed.Caps.Spend.Spent.Cents != 20 {
		t.Errorf("PATCH caps = %+v, want 100 a day with 20 spent", changed.Caps.Spend)
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(alice, "k-over", 11)})

	// The members, listed; then bob removed: his next call is refused.
	var list struct{ Items []entitlement.Membership }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/wallets/" + team + "/members", Key: e.keys.Billing}).decode(t, &list)
	if len(list.Items) != 2 || list.Items[0].MemberID != alice || list.Items[1].MemberID != bob {
		t.Errorf("members = %+v, want alice and bob", list.Items)
	}
	e.must(http.StatusOK, req{Method: "DELETE", Path: "/v1/wallets/" + team + "/members/" + bob, Key: e.keys.Admin})
	e.must(http.StatusNotFound, req{Method: "DELETE", Path: "/v1/wallets/" + team + "/members/" + bob, Key: e.keys.Admin})
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/wallets/" + team + "/members/" + bob, Key: e.keys.Billing})
	e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(bob, "k-gone", 1)})
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(alice, "k-still", 1)})

	// The outbox: two adds, one change, one removal, and bob's charge of 40
	// that took his day to its 50. (The adds were at one instant of the
	// test's clock, so in either order.)
	got := map[event.Type][]string{}
	for _, ev := range e.walletEvents() {
		var d struct{ MemberID, ConsumptionID string }
		if err := json.Unmarshal(ev.Data, &d); err != nil || ev.AgentID != team {
			t.Errorf("event %s: agent %q, data %s (%v); want the wallet's, a membership", ev.Type, ev.AgentID, ev.Data, err)
		}
		got[ev.Type] = append(got[ev.Type], d.MemberID)
		if ev.Type == event.WalletMemberLimitReached && d.ConsumptionID == "" {
			t.Errorf("wallet.member_limit_reached %s names no consumption", ev.Data)
		}
	}
	wantEvents := map[event.Type][]string{event.WalletMemberAdded: {alice, bob}, event.WalletMemberUpdated: {alice},
		event.WalletMemberRemoved: {bob}, event.WalletMemberLimitReached: {bob}}
	for _, members := range got {
		slices.Sort(members)
	}
	if d := cmp.Diff(wantEvents, got); d != "" {
		t.Errorf("wallet events (-want +got):\n%s", d)
	}
}

// walletEvents returns the wallet events of the store's outbox, oldest first.
func (e *env) walletEvents() []event.Event {
	e.t.Helper()
	evs, err := e.store.PendingEvents(context.Background(), 1000)
	if err != nil {
		e.t.Fatalf("PendingEvents: %v", err)
	}
	return slices.DeleteFunc(evs, func(ev event.Event) bool { return !strings.HasPrefix(string(ev.Type), "wallet.") })
}

// TestWallets_Kind: an account's kind is set when it is made and never
// changes; a wallet never calls.
func TestWallets_Kind(t *testing.T) {
	e := newEnv(t)
	e.makeWallet(walletW)
	p := e.must(http.StatusConflict, req{Method: "PUT", Path: "/v1/accounts/" + walletW, Key: e.keys.Billing, Body: `{"kind":"agent"}`}).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "kind" {
		t.Errorf("PUT kind agent on a wallet: errors %+v, want one naming kind", p.Errors)
	}
	var a entitlement.Account
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + walletW, Key: e.keys.Billing, Body: `{"displayName":"Team"}`}).decode(t, &a)
	if a.Kind != entitlement.KindWallet || a.DisplayName != "Team" {
		t.Errorf("PUT without kind on a wallet = %+v, want it still a wallet, renamed", a)
	}
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing})
	p = e.must(http.StatusConflict, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing, Body: `{"kind":"wallet"}`}).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "kind" {
		t.Errorf("PUT kind wallet on an agent: errors %+v, want one naming kind", p.Errors)
	}
	for _, body := range []string{`{"kind":"team"}`, `{"kind":1}`, `{"kind":null,"x":1}`} {
		p := e.must(http.StatusBadRequest, req{Method: "PUT", Path: "/v1/accounts/fresh", Key: e.keys.Billing, Body: body}).problem(t)
		if len(p.Errors) == 0 || (p.Errors[0].Field != "kind" && p.Errors[0].Field != "x") {
			t.Errorf("PUT %s: errors %+v, want one naming the field", body, p.Errors)
		}
	}
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/accounts/fresh", Key: e.keys.Billing})

	e.grantCredits(walletW, 100)
	p = e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(walletW, "k", 1)}).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "agentId" {
		t.Errorf("consume as a wallet: errors %+v, want one naming agentId", p.Errors)
	}
	p = e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(walletW, "h", 1)}).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Field != "agentId" {
		t.Errorf("authorize as a wallet: errors %+v, want one naming agentId", p.Errors)
	}
	e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/check", Key: e.keys.Host, Body: consumeBody(walletW, "k", 1)})
}

// TestWallets_BadInput: every refused membership request is a 4xx naming
// the field, and changes nothing (no membership, no account, no event), on
// every store.
func TestWallets_BadInput(t *testing.T) {
	for _, st := range storeEnvs {
		t.Run(st.name, func(t *testing.T) { walletBadInput(t, st.env(t)) })
	}
}

func walletBadInput(t *testing.T, e *env) {
	e.makeWallet(walletW)
	e.makeWallet("other-wallet")
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentB, Key: e.keys.Billing})
	e.addMember(walletW, agentA, dailyCap(50))
	members := func() string {
		t.Helper()
		return string(e.must(http.StatusOK, req{Method: "GET", Path: "/v1/wallets/" + walletW + "/members", Key: e.keys.Admin}).Body)
	}
	before, events := members(), len(e.walletEvents())
	w := "/v1/wallets/" + walletW + "/members"
	tests := []struct {
		name, method, path string
		body               string
		status             int
		field              string
	}{
		{"UnknownField", "POST", w, `{"memberId":"m1","color":"red"}`, 400, "color"},
		{"NoMember", "POST", w, `{}`, 400, "memberId"},
		{"MemberNotAString", "POST", w, `{"memberId":5}`, 400, "memberId"},
		{"MemberTooLong", "POST", w, `{"memberId":"` + strings.Repeat("m", 201) + `"}`, 400, "memberId"},
		{"BadOrder", "POST", w, `{"memberId":"m1","order":"last"}`, 400, "order"},
		{"OrderNotAString", "POST", w, `{"memberId":"m1","order":2}`, 400, "order"},
		{"NegativeMaxPerCall", "POST", w, `{"memberId":"m1","caps":{"maxPerCall":{"cents":-5,"currency":"USD"}}}`, 400, "caps.maxPerCall.cents"},
		{"ZeroMaxUnits", "POST", w, `{"memberId":"m1","caps":{"maxUnitsPerCall":0}}`, 400, "caps.maxUnitsPerCall"},
		{"HugeMaxUnits", "POST", w, `{"memberId":"m1","caps":{"maxUnitsPerCall":1000000000000}}`, 400, "caps.maxUnitsPerCall"},
		{"NegativeSpend", "POST", w, `{"memberId":"m1","caps":{"spendLimit":{"period":"day","max":{"cents":-1,"currency":"USD"}}}}`, 400, "caps.spendLimit.max.cents"},
		{"SpendNoPeriod", "POST", w, `{"memberId":"m1","caps":{"spendLimit":{"max":{"cents":1,"currency":"USD"}}}}`, 400, "caps.spendLimit.period"},
		{"SpendBadPeriod", "POST", w, `{"memberId":"m1","caps":{"spendLimit":{"period":"year","max":{"cents":1,"currency":"USD"}}}}`, 400, "caps.spendLimit.period"},
		{"SpendNoMost", "POST", w, `{"memberId":"m1","caps":{"spendLimit":{"period":"day"}}}`, 400, "caps.spendLimit.max"},
		{"TwoCurrencies", "POST", w, `{"memberId":"m1","caps":{"maxPerCall":{"cents":5,"currency":"USD"},"spendLimit":{"period":"day","max":{"cents":50,"currency":"EUR"}}}}`, 400, "caps.spendLimit.max.currency"},
		{"CapsNotAnObject", "POST", w, `{"memberId":"m1","caps":[]}`, 400, "caps"},
		{"MemberIsTheWallet", "POST", w, `{"memberId":"` + walletW + `"}`, 400, "memberId"},
		{"MemberIsAWallet", "POST", w, `{"memberId":"other-wallet"}`, 400, "memberId"},
		{"UnknownWallet", "POST", "/v1/wallets/no-such-wallet/members", `{"memberId":"m1"}`, 404, "walletId"},
		{"AgentAsWallet", "POST", "/v1/wallets/" + agentB + "/members", `{"memberId":"m1"}`, 404, "walletId"},
		{"MemberAlready", "POST", w, `{"memberId":"` + agentA + `"}`, 409, "memberId"},
		{"PatchUnknownField", "PATCH", w + "/" + agentA, `{"memberId":"m2"}`, 400, "memberId"},
		{"PatchBadOrder", "PATCH", w + "/" + agentA, `{"order":"first"}`, 400, "order"},
		{"PatchNullOrder", "PATCH", w + "/" + agentA, `{"order":null}`, 400, "order"},
		{"PatchNegativeCaps", "PATCH", w + "/" + agentA, `{"caps":{"maxPerCall":{"cents":0,"currency":"USD"}}}`, 400, "caps.maxPerCall.cents"},
		{"PatchSpendNoPeriod", "PATCH", w + "/" + agentA, `{"caps":{"spendLimit":{}}}`, 400, "caps.spendLimit.period"},
		{"PatchNotMember", "PATCH", w + "/" + agentB, `{"order":"wallet_first"}`, 404, "memberId"},
		{"DeleteNotMember", "DELETE", w + "/" + agentB, ``, 404, "memberId"},
		{"DeleteWithBody", "DELETE", w + "/" + agentA, `{"force":true}`, 400, "force"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := e.with(t)
			var body any
			if tt.body != "" {
				body = tt.body
			}
			p := e.must(tt.status, req{Method: tt.method, Path: tt.path, Key: e.keys.Admin, Body: body}).problem(t)
			if len(p.Errors) == 0 || p.Errors[0].Field != tt.field {
				t.Errorf("%s %s %s: errors %+v, want the first naming %q", tt.method, tt.path, tt.body, p.Errors, tt.field)
			}
			if after := members(); after != before {
				t.Errorf("%s %s %s changed the members:\nbefore %s\nafter  %s", tt.method, tt.path, tt.body, before, after)
			}
			if n := len(e.walletEvents()); n != events {
				t.Errorf("%s %s %s wrote %d wallet events", tt.method, tt.path, tt.body, n-events)
			}
		})
	}
	for _, path := range []string{"/v1/wallets/no-such-wallet/members", "/v1/wallets/" + agentB + "/members"} {
		p := e.must(http.StatusNotFound, req{Method: "GET", Path: path, Key: e.keys.Billing}).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Field != "walletId" {
			t.Errorf("GET %s: errors %+v, want walletId", path, p.Errors)
		}
	}
	// No refused add made the member's account.
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/accounts/m1", Key: e.keys.Billing})
	e.must(http.StatusBadRequest, req{Method: "GET", Path: w + "?limit=0", Key: e.keys.Billing})
	e.must(http.StatusBadRequest, req{Method: "GET", Path: w + "?cursor=garbage", Key: e.keys.Billing})
	e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/wallets?cursor=garbage", Key: e.keys.Billing})
}

// TestWallets_Roles: admins write memberships; billing keys and readers
// of the wallet read them; a reader of another account may not.
func TestWallets_Roles(t *testing.T) {
	e := newEnv(t)
	e.makeWallet(walletW)
	e.addMember(walletW, agentA, nil)
	w := "/v1/wallets/" + walletW + "/members"
	for _, key := range []string{e.keys.Host, e.keys.Billing, e.keys.Reader} {
		e.must(http.StatusForbidden, req{Method: "POST", Path: w, Key: key, Body: `{"memberId":"m1"}`})
		e.must(http.StatusForbidden, req{Method: "PATCH", Path: w + "/" + agentA, Key: key, Body: `{}`})
		e.must(http.StatusForbidden, req{Method: "DELETE", Path: w + "/" + agentA, Key: key})
	}
	for _, key := range []string{e.keys.Billing, e.keys.Reader, e.keys.Admin} {
		e.must(http.StatusOK, req{Method: "GET", Path: w, Key: key})
		e.must(http.StatusOK, req{Method: "GET", Path: w + "/" + agentA, Key: key})
		e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/wallets", Key: key})
	}
	e.must(http.StatusForbidden, req{Method: "GET", Path: w, Key: e.keys.OtherReader})
	e.must(http.StatusForbidden, req{Method: "GET", Path: w + "/" + agentA, Key: e.keys.OtherReader})
	e.must(http.StatusForbidden, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/wallets", Key: e.keys.OtherReader})
	e.must(http.StatusForbidden, req{Method: "GET", Path: w, Key: e.keys.Host})
}

// TestWallets_AddMemberIdempotent: the add is behind the idempotency
// ledger: a retry with the same key answers the same membership, once.
func TestWallets_AddMemberIdempotent(t *testing.T) {
	e := newEnv(t)
	e.autoKey = false
	e.makeWallet(walletW)
	w := "/v1/wallets/" + walletW + "/members"
	p := e.must(http.StatusBadRequest, req{Method: "POST", Path: w, Key: e.keys.Admin, Body: `{"memberId":"m1"}`}).problem(t)
	if p.Type != problem.TypeBase+string(problem.IdempotencyKeyMissing) {
		t.Errorf("POST without a key: %s, want idempotency-key-missing", p.Type)
	}
	key := map[string]string{"Idempotency-Key": "add-m1"}
	first := e.must(http.StatusCreated, req{Method: "POST", Path: w, Key: e.keys.Admin, Body: `{"memberId":"m1"}`, Header: key})
	again := e.must(http.StatusCreated, req{Method: "POST", Path: w, Key: e.keys.Admin, Body: `{"memberId":"m1"}`, Header: key})
	if string(again.Body) != string(first.Body) || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("retry answered %s (replayed %q), want the first answer %s replayed", again.Body, again.Header.Get("Idempotent-Replayed"), first.Body)
	}
	e.must(http.StatusConflict, req{Method: "POST", Path: w, Key: e.keys.Admin, Body: `{"memberId":"m1"}`, Header: map[string]string{"Idempotency-Key": "add-m1-again"}})
}

// TestWallets_ConcurrentAdds: many admins adding the same member at once
// make one membership; the others are told it exists.
func TestWallets_ConcurrentAdds(t *testing.T) {
	e := newEnv(t)
	e.noSpec = true // concurrent spec checks are slow; the other tests check these answers
	e.makeWallet(walletW)
	var wg sync.WaitGroup
	statuses := make([]int, 16)
	for i := range statuses {
		wg.Go(func() {
			statuses[i] = e.do(req{Method: "POST", Path: "/v1/wallets/" + walletW + "/members", Key: e.keys.Admin, Body: `{"memberId":"m1"}`}).Status
		})
	}
	wg.Wait()
	created := 0
	for _, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusConflict:
		default:
			t.Errorf("concurrent add: status %d, want 201 or 409", s)
		}
	}
	var list struct{ Items []entitlement.Membership }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/wallets/" + walletW + "/members", Key: e.keys.Admin}).decode(t, &list)
	if created != 1 || len(list.Items) != 1 {
		t.Errorf("%d adds created, %d members; want 1 and 1", created, len(list.Items))
	}
}

// TestWallets_Paging: the members of a wallet and the wallets of an agent
// come in pages, by ID.
func TestWallets_Paging(t *testing.T) {
	e := newEnv(t)
	for i := range 3 {
		w := fmt.Sprint("w", i)
		e.makeWallet(w)
		e.addMember(w, agentA, nil)
		e.addMember(w0, fmt.Sprint("m", i), nil)
	}
	ids := membershipPages(t, e, "/v1/accounts/"+agentA+"/wallets", e.keys.Reader, func(m entitlement.Membership) string { return m.WalletID })
	if !slices.Equal(ids, []string{"w0", "w1", "w2"}) {
		t.Errorf("agent's wallets by page = %v, want w0 w1 w2", ids)
	}
	ids = membershipPages(t, e, "/v1/wallets/"+w0+"/members", e.keys.Billing, func(m entitlement.Membership) string { return m.MemberID })
	if !slices.Equal(ids, []string{agentA, "m0", "m1", "m2"}) {
		t.Errorf("members by page = %v, want %s m0 m1 m2", ids, agentA)
	}
}

// w0 is the first wallet of TestWallets_Paging.
const w0 = "w0"

// TestWallets_HoldShowsWallet: a member's hold on the wallet names it, and
// what it reserves counts against the member's cap until it ends.
func TestWallets_HoldShowsWallet(t *testing.T) {
	e := newEnv(t)
	e.makeWallet(walletW)
	ent := e.grantCredits(walletW, 1000)
	e.addMember(walletW, agentA, dailyCap(30))
	var held struct{ Hold entitlement.Hold }
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, "h1", 25)}).decode(t, &held)
	if held.Hold.WalletID != walletW || held.Hold.EntitlementID != ent || held.Hold.AgentID != agentA {
		t.Errorf("hold = %+v, want agent %s on %s's %s", held.Hold, agentA, walletW, ent)
	}
	p := e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 10)}).problem(t)
	if len(p.Reasons) == 0 || p.Reasons[0].Reason != entitlement.ReasonMemberLimit || p.Reasons[0].Limit != entitlement.LimitSpend {
		t.Errorf("consume while the hold reserves 25 of 30: reasons %+v, want member_limit_reached spendLimit", p.Reasons)
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/holds/" + held.Hold.ID + "/release", Key: e.keys.Host, Body: map[string]any{"agentId": agentA}})
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 10)})
}

// exerciseWalletRoutes answers the wallet routes' error statuses for
// TestOpenAPI_Responses (the route table answers their successes) and the
// CORS preflights of those a portal session may call.
func exerciseWalletRoutes(t *testing.T, seen *sync.Map) {
	e := newEnv(t)
	e.seen = seen
	e.makeWallet(walletW)
	e.addMember(walletW, agentA, dailyCap(10))
	e.grantCredits(walletW, 100)
	w := "/v1/wallets/" + walletW + "/members"
	e.must(http.StatusBadRequest, req{Method: "POST", Path: w, Key: e.keys.Admin, Body: `{"memberId":"m","order":"x"}`})
	e.must(http.StatusNotFound, req{Method: "POST", Path: "/v1/wallets/nope/members", Key: e.keys.Admin, Body: `{"memberId":"m"}`})
	e.must(http.StatusConflict, req{Method: "POST", Path: w, Key: e.keys.Admin, Body: `{"memberId":"` + agentA + `"}`})
	e.must(http.StatusNotFound, req{Method: "GET", Path: "/v1/wallets/nope/members", Key: e.keys.Admin})
	e.must(http.StatusNotFound, req{Method: "GET", Path: w + "/nobody", Key: e.keys.Admin})
	e.must(http.StatusBadRequest, req{Method: "PATCH", Path: w + "/" + agentA, Key: e.keys.Admin, Body: `{"caps":{"maxUnitsPerCall":-1}}`})
	e.must(http.StatusNotFound, req{Method: "PATCH", Path: w + "/nobody", Key: e.keys.Admin, Body: `{}`})
	e.must(http.StatusNotFound, req{Method: "DELETE", Path: w + "/nobody", Key: e.keys.Admin})
	e.must(http.StatusConflict, req{Method: "PUT", Path: "/v1/accounts/" + walletW, Key: e.keys.Billing, Body: `{"kind":"agent"}`})
	e.must(http.StatusPaymentRequired, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "over", 11)})
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "in", 5)})
	e.clock.Advance(time.Minute)
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + walletW + "/usage?groupBy=member", Key: e.keys.Billing})
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/authorize", Key: e.keys.Host, Body: authorizeBody(agentA, "h", 2)})
	e.must(http.StatusBadRequest, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(walletW, "as-wallet", 1)})
	for _, path := range []string{w, "/v1/accounts/" + agentA + "/wallets"} {
		e.must(http.StatusNoContent, req{Method: "OPTIONS", Path: path, Header: map[string]string{"Origin": "null", "Access-Control-Request-Method": "GET"}})
	}
}

// TestPortal_WalletSession: a portal session may be minted for a wallet:
// it reads the wallet's balance, its members' consumptions and usage by
// member, and its members, and nothing of another wallet or agent.
func TestPortal_WalletSession(t *testing.T) {
	e := newEnv(t)
	e.makeWallet(walletW)
	e.makeWallet("other-wallet")
	e.grantCredits(walletW, 100)
	e.addMember(walletW, agentA, dailyCap(50))
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 7)})
	ps := e.mintPortal(walletW, nil)

	var me struct{ AgentID string }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/portal/session", Key: ps.Token}).decode(t, &me)
	if me.AgentID != walletW {
		t.Errorf("GET /v1/portal/session: agent %q, want the wallet %s", me.AgentID, walletW)
	}
	var b entitlement.Balance
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + walletW + "/balance", Key: ps.Token}).decode(t, &b)
	if len(b.Credits) != 1 || b.Credits[0].Available.Cents != 93 {
		t.Errorf("wallet's balance with its session = %+v, want 93 USD available", b.Credits)
	}
	var cs struct{ Items []entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + walletW + "/consumptions", Key: ps.Token}).decode(t, &cs)
	if len(cs.Items) != 1 || cs.Items[0].AgentID != agentA || cs.Items[0].WalletID != walletW {
		t.Errorf("wallet's consumptions with its session = %+v, want agentA's one on the wallet", cs.Items)
	}
	e.clock.Advance(time.Minute) // the range ends now, excluded
	var page usagePage
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + walletW + "/usage?groupBy=member", Key: ps.Token}).decode(t, &page)
	if len(page.Items) != 1 || page.Items[0].MemberID != agentA {
		t.Errorf("wallet's usage by member with its session = %+v, want one bucket of %s", page.Items, agentA)
	}
	var list struct{ Items []entitlement.Membership }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/wallets/" + walletW + "/members", Key: ps.Token}).decode(t, &list)
	if len(list.Items) != 1 || list.Items[0].MemberID != agentA {
		t.Errorf("wallet's members with its session = %+v, want %s", list.Items, agentA)
	}
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + walletW + "/receipts", Key: ps.Token})
	for _, r := range []req{
		{Method: "GET", Path: "/v1/wallets/other-wallet/members"},
		{Method: "GET", Path: "/v1/wallets/" + walletW + "/members/" + agentA},
		{Method: "PATCH", Path: "/v1/wallets/" + walletW + "/members/" + agentA, Body: `{}`},
		{Method: "DELETE", Path: "/v1/wallets/" + walletW + "/members/" + agentA},
		{Method: "POST", Path: "/v1/wallets/" + walletW + "/members", Body: `{"memberId":"x"}`},
		{Method: "GET", Path: "/v1/accounts/" + agentA + "/balance"},
		{Method: "GET", Path: "/v1/accounts/" + agentA + "/wallets"},
	} {
		r.Key = ps.Token
		if res := e.do(r); res.Status != http.StatusUnauthorized {
			t.Errorf("%s %s with the wallet's session: %d, want 401", r.Method, r.Path, res.Status)
		}
	}
	// An agent's session sees its wallets, not their members.
	as := e.mintPortal(agentA, nil)
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/wallets", Key: as.Token})
	e.must(http.StatusUnauthorized, req{Method: "GET", Path: "/v1/wallets/" + walletW + "/members", Key: as.Token})
}

// FuzzWalletBodies: whatever the body, adding a member (POST), changing
// one (PATCH) and making an account (PUT, its kind) answer a success or a
// 4xx problem naming a field; they never panic. The seeds run in every
// normal test run.
func FuzzWalletBodies(f *testing.F) {
	for _, s := range []string{
		`{"memberId":"m1"}`,
		`{"memberId":"m1","order":"wallet_first","caps":{"maxPerCall":{"cents":5,"currency":"USD"},"spendLimit":{"period":"day","max":{"cents":50,"currency":"USD"}}}}`,
		`{"memberId":"m1","caps":{"maxUnitsPerCall":3,"spendLimit":{"period":"week","maxUnits":10}}}`,
		`{"memberId":"m1","caps":{"spendLimit":{"period":"month","max":{"cents":5,"currency":"EUR"},"maxUnits":7}}}`,
		`{"memberId":"m1","caps":{"maxPerCall":{"cents":-1,"currency":"USD"}}}`,
		`{"memberId":"m1","caps":{"spendLimit":{}}}`,
		`{"memberId":"m1","caps":{"spendLimit":{"period":"day","spent":{"cents":1,"currency":"USD"}}}}`,
		`{"memberId":"` + walletW + `"}`, `{"memberId":""}`, `{"memberId":null}`, `{"memberId":"m1","order":null}`,
		`{"order":"own_first"}`, `{"caps":null}`, `{"caps":{}}`, `{"order":"wallet_first","caps":{"maxUnitsPerCall":1000000}}`,
		`{"caps":{"maxUnitsPerCall":1000001}}`, `{"caps":{"maxUnitsPerCall":1.5}}`, `{"caps":[]}`, `{"order":1}`,
		`{"kind":"wallet"}`, `{"kind":"agent","displayName":"x"}`, `{"kind":""}`, `{"kind":"robot"}`,
		`{"memberId":"m1","memberId":"m2"}`, `{"caps":null,"caps":null}`,
		`[]`, `null`, ``, `{`, `{}`, `{} {}`, `"x"`,
	} {
		f.Add([]byte(s))
	}
	base := newEnv(f)
	base.makeWallet(walletW)
	base.addMember(walletW, agentA, dailyCap(100))
	f.Fuzz(func(t *testing.T, body []byte) {
		e := base.with(t)
		e.noSpec = true // the other wallet tests check the answers against the spec
		for _, r := range []req{
			{Method: "POST", Path: "/v1/wallets/" + walletW + "/members"},
			{Method: "PATCH", Path: "/v1/wallets/" + walletW + "/members/" + agentA},
			{Method: "PUT", Path: "/v1/accounts/fuzz-account"},
		} {
			r.Key, r.Body = e.keys.Admin, body
			res := e.do(r)
			switch {
			case res.Status == http.StatusOK || res.Status == http.StatusCreated:
				continue
			case res.Status >= 500 || res.Status < 400:
				t.Fatalf("%s %s %q: status %d body %s", r.Method, r.Path, body, res.Status, res.Body)
			}
			if p := res.problem(t); len(p.Errors) == 0 || p.Detail == "" {
				t.Fatalf("%s %s %q: problem %+v names no field", r.Method, r.Path, body, p)
			}
		}
	})
}

// TestWallets_EventTypes: an endpoint may subscribe to the wallet events.
func TestWallets_EventTypes(t *testing.T) {
	e := newEnv(t)
	types := []string{"wallet.member_added", "wallet.member_updated", "wallet.member_removed", "wallet.member_limit_reached"}
	var ep struct{ EventTypes []string }
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/webhook-endpoints", Key: e.keys.Admin,
		Body: map[string]any{"url": "https://hooks.example/wallets", "eventTypes": types}}).decode(t, &ep)
	if !slices.Equal(ep.EventTypes, types) {
		t.Errorf("endpoint's eventTypes = %v, want %v", ep.EventTypes, types)
	}
}

// membershipPages walks the membership list at path two at a time with key
// and answers id of each membership, in the order listed.
func membershipPages(t *testing.T, e *env, path, key string, id func(entitlement.Membership) string) []string {
	t.Helper()
	var ids []string
	for cursor := ""; ; {
		var page struct {
			Items      []entitlement.Membership
			NextCursor string
		}
		e.must(http.StatusOK, req{Method: "GET", Path: path + "?limit=2&cursor=" + cursor, Key: key}).decode(t, &page)
		for _, m := range page.Items {
			ids = append(ids, id(m))
		}
		if cursor = page.NextCursor; cursor == "" {
			return ids
		}
	}
}
