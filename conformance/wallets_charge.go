package conformance

import (
	"testing"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
	"github.com/stipend-mcp/stipend/usage"
)

// walletChargeTests are the cases of members' charges to a wallet: caps,
// removal, order, holds, refunds, a revoke, and who spent what.
var walletChargeTests = []subtest{
	{"WalletMemberCap", walletMemberCap},
	{"WalletMemberUnitsCap", walletMemberUnitsCap},
	{"WalletRemovedMemberStops", walletRemovedMemberStops},
	{"WalletOrder", walletOrder},
	{"WalletHoldsCountAgainstCap", walletHoldsCountAgainstCap},
	{"WalletRevokeWithMemberHolds", walletRevokeWithMemberHolds},
	{"WalletUsageAndConsumptions", walletUsageAndConsumptions},
	{"WalletAlertsAndTopUp", walletAlertsAndTopUp},
}

// wantMemberDenied fails unless res is one member_limit_reached denial of
// member's limit on entitlement id.
func wantMemberDenied(t *testing.T, req entitlement.ConsumeRequest, res store.ConsumeResult, id, limit string) {
	t.Helper()
	consumeAnswer(req, res).wantDenied(t, []entitlement.Denial{entitlement.MemberDenial(id, req.AgentID, limit)})
}

func walletMemberCap(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, e := walletWithCredits(t, s, 10_000, clock.Now())
	capped, free := newAgent(), newAgent()
	addMember(t, s, w, capped, "", entitlement.Limits{MaxPerCall: ptr(usd(150)), Spend: dailyCap(300).Spend})
	addMember(t, s, w, free, "", entitlement.Limits{})

	var last store.ConsumeResult
	for _, key := range []string{"k1", "k2", "k3"} {
		last = mustConsume(t, s, request(capped, key, 100))
		if c := last.Consumption; c.AgentID != capped || c.WalletID != w || c.EntitlementID != e.ID {
			t.Errorf("member's consumption = agent %s, wallet %s, entitlement %s; want %s, %s, %s", c.AgentID, c.WalletID, c.EntitlementID, capped, w, e.ID)
		}
	}
	req := request(capped, "k4", 1)
	wantMemberDenied(t, req, checkAndConsume(t, s, req), e.ID, entitlement.LimitSpend)
	check := must(s.Check(ctx, req))(t, "Check(at the cap)")
	wantMemberDenied(t, req, check, e.ID, entitlement.LimitSpend)
	hr := holdRequest(capped, "h1", 1)
	holdAnswer(hr, authorize(t, s, hr)).wantDenied(t, []entitlement.Denial{entitlement.MemberDenial(e.ID, capped, entitlement.LimitSpend)})
	// Another member spends on.
	for _, key := range []string{"f1", "f2"} {
		mustConsume(t, s, request(free, key, 400))
	}
	// The most per call.
	other := newWallet(t, s)
	createEntitlement(t, s, credits(other, 1000, clock.Now()))
	addMember(t, s, other, capped, "", entitlement.Limits{MaxPerCall: ptr(usd(150))})
	req = request(capped, "k5", 151)
	res := checkAndConsume(t, s, req)
	if res.Outcome != store.Denied || len(res.Denials) != 2 {
		t.Fatalf("CheckAndConsume(151 over two wallets) = %s %+v, want two member denials", res.Outcome, res.Denials)
	}
	for _, d := range res.Denials {
		if d.Reason != entitlement.ReasonMemberLimit || d.MemberID != capped || (d.Limit != entitlement.LimitMaxPerCall && d.Limit != entitlement.LimitSpend) {
			t.Errorf("denial %+v, want member_limit_reached of %s (maxPerCall or spendLimit)", d, capped)
		}
	}

	if got := getMember(t, s, w, capped); got.Caps.Spend.Spent != usd(300) {
		t.Errorf("GetMember(capped) spent = %v, want 300 USD", got.Caps.Spend.Spent)
	}
	if got := getEntitlement(t, s, e.ID); got.Credits.Balance != usd(10_000-300-800) {
		t.Errorf("wallet balance = %v, want %d", got.Credits.Balance, 10_000-300-800)
	}
	reached := walletEvents(t, s, w, event.WalletMemberLimitReached)
	if len(reached) != 1 || reached[0]["memberId"] != capped || reached[0]["consumptionId"] != last.Consumption.ID {
		t.Errorf("wallet.member_limit_reached events = %v, want one for %s naming consumption %s", reached, capped, last.Consumption.ID)
	}
	// The next day the cap starts again.
	clock.Advance(24 * time.Hour)
	mustConsume(t, s, request(capped, "k6", 100))
}

func walletMemberUnitsCap(t *testing.T, s store.EntitlementStore, clock *Clock) {
	w := newWallet(t, s)
	q := createEntitlement(t, s, quota(w, 100, clock.Now()))
	member := newAgent()
	addMember(t, s, w, member, "", entitlement.Limits{MaxUnitsPerCall: ptr(int64(5)), Spend: entitlement.SpendLimit{Period: entitlement.PeriodDay, MaxUnits: 8}})
	req := unitsRequest(member, "u1", 6)
	wantMemberDenied(t, req, checkAndConsume(t, s, req), q.ID, entitlement.LimitMaxUnitsPerCall)
	mustConsume(t, s, unitsRequest(member, "u2", 5))
	req = unitsRequest(member, "u3", 4)
	wantMemberDenied(t, req, checkAndConsume(t, s, req), q.ID, entitlement.LimitSpend)
	mustConsume(t, s, unitsRequest(member, "u4", 3))
	if got := getMember(t, s, w, member); got.Caps.Spend.SpentUnits != 8 {
		t.Errorf("GetMember spentUnits = %d, want 8", got.Caps.Spend.SpentUnits)
	}
}

func walletRemovedMemberStops(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, e, member := walletWithMember(t, s, clock.Now(), dailyCap(1000))
	mustConsume(t, s, request(member, "k1", 100))
	h := mustAuthorize(t, s, holdRequest(member, "h1", 100)).Hold
	must(s.RemoveMember(ctx, w, member))(t, "RemoveMember")

	req := request(member, "k2", 100)
	consumeAnswer(req, checkAndConsume(t, s, req)).wantDenied(t, []entitlement.Denial{{Reason: entitlement.ReasonNotFound}})
	req.EntitlementID = e.ID
	consumeAnswer(req, checkAndConsume(t, s, req)).wantDenied(t, []entitlement.Denial{{EntitlementID: e.ID, Reason: entitlement.ReasonNotFound}})
	hr := holdRequest(member, "h2", 100)
	hr.EntitlementID = e.ID
	holdAnswer(hr, authorize(t, s, hr)).wantDenied(t, []entitlement.Denial{{EntitlementID: e.ID, Reason: entitlement.ReasonNotFound}})
	// What it held while a member it may still capture: the money was reserved.
	res := mustCapture(t, s, h, entitlement.Amount{Cost: ptr(usd(60))})
	if res.Consumption.WalletID != w {
		t.Errorf("capture after removal: consumption walletId %q, want %s", res.Consumption.WalletID, w)
	}
	if got := getEntitlement(t, s, e.ID); got.Credits.Balance != usd(10_000-100-60) || got.Credits.Held.Cents != 0 {
		t.Errorf("wallet after removal and capture = %v held %v, want 9840 held 0", got.Credits.Balance, got.Credits.Held)
	}
}

func walletOrder(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, we := walletWithCredits(t, s, 1000, clock.Now())
	member, own := agentWithCredits(t, s, 1000, clock.Now())
	addMember(t, s, w, member, entitlement.OrderOwnFirst, entitlement.Limits{})
	if got := mustConsume(t, s, request(member, "k1", 10)).Consumption; got.EntitlementID != own.ID || got.WalletID != "" {
		t.Errorf("own_first charged %s (wallet %q), want its own %s", got.EntitlementID, got.WalletID, own.ID)
	}
	first := entitlement.OrderWalletFirst
	must(s.UpdateMember(ctx, w, member, store.MemberUpdate{Order: &first}))(t, "UpdateMember(wallet_first)")
	if got := mustConsume(t, s, request(member, "k2", 10)).Consumption; got.EntitlementID != we.ID || got.WalletID != w {
		t.Errorf("wallet_first charged %s (wallet %q), want the wallet's %s", got.EntitlementID, got.WalletID, we.ID)
	}
	if got := must(s.Check(ctx, request(member, "k3", 10)))(t, "Check(wallet_first)"); got.Outcome != store.Allowed || got.Entitlement.ID != we.ID {
		t.Errorf("Check(wallet_first) = %s on %s, want allowed on %s", got.Outcome, got.Entitlement.ID, we.ID)
	}
	// Once the wallet cannot pay, the member's own pays.
	mustConsume(t, s, request(member, "k4", 990))
	if got := mustConsume(t, s, request(member, "k5", 10)).Consumption; got.EntitlementID != own.ID {
		t.Errorf("wallet_first with the wallet empty charged %s, want %s", got.EntitlementID, own.ID)
	}
	// A member may name a wallet's entitlement; another agent may not.
	w2, we2 := walletWithCredits(t, s, 1000, clock.Now())
	addMember(t, s, w2, member, entitlement.OrderOwnFirst, entitlement.Limits{})
	req := request(member, "k6", 10)
	req.EntitlementID = we2.ID
	if got := mustConsume(t, s, req).Consumption; got.EntitlementID != we2.ID || got.WalletID != w2 {
		t.Errorf("naming the wallet's entitlement charged %s (wallet %q), want %s", got.EntitlementID, got.WalletID, we2.ID)
	}
	stranger, _ := agentWithCredits(t, s, 1000, clock.Now())
	req = request(stranger, "k1", 10)
	req.EntitlementID = we2.ID
	consumeAnswer(req, checkAndConsume(t, s, req)).wantDenied(t, []entitlement.Denial{{EntitlementID: we2.ID, Reason: entitlement.ReasonNotFound}})
	if got := must(s.Check(ctx, req))(t, "Check(stranger names the wallet's)"); got.Outcome != store.Denied {
		t.Errorf("Check(a stranger naming the wallet's entitlement) = %s, want denied", got.Outcome)
	}
}

func walletHoldsCountAgainstCap(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, e, member := walletWithMember(t, s, clock.Now(), dailyCap(500))
	h := mustAuthorize(t, s, holdRequest(member, "h1", 400)).Hold
	if h.WalletID != w || h.AgentID != member {
		t.Errorf("member's hold = agent %s wallet %s, want %s, %s", h.AgentID, h.WalletID, member, w)
	}
	req := request(member, "k1", 101)
	wantMemberDenied(t, req, checkAndConsume(t, s, req), e.ID, entitlement.LimitSpend)
	mustRelease(t, s, h, store.Released)
	c500 := mustConsume(t, s, request(member, "k2", 500)).Consumption
	req = request(member, "k3", 1)
	wantMemberDenied(t, req, checkAndConsume(t, s, req), e.ID, entitlement.LimitSpend)
	// A refund in the period gives the spend back.
	must(s.RefundConsumption(ctx, c500.ID, entitlement.Amount{Cost: ptr(usd(300))}))(t, "RefundConsumption(300)")
	h2 := mustAuthorize(t, s, holdRequest(member, "h2", 300)).Hold
	capture := mustCapture(t, s, h2, entitlement.Amount{Cost: ptr(usd(100))})
	if capture.Consumption.WalletID != w {
		t.Errorf("capture's consumption walletId = %q, want %s", capture.Consumption.WalletID, w)
	}
	// Spent: 500 − 300 + 100 = 300; 200 left.
	if got := getMember(t, s, w, member); got.Caps.Spend.Spent != usd(300) || len(got.Holds) != 0 {
		t.Errorf("GetMember = spent %v, holds %v; want 300 USD and none", got.Caps.Spend.Spent, got.Holds)
	}
	mustConsume(t, s, request(member, "k4", 200))
	req = request(member, "k5", 1)
	wantMemberDenied(t, req, checkAndConsume(t, s, req), e.ID, entitlement.LimitSpend)
	// An expired hold stops counting at its expiry.
	clock.Advance(24 * time.Hour)
	h3 := mustAuthorize(t, s, holdRequest(member, "h3", 500)).Hold
	clock.Set(h3.ExpiresAt)
	mustConsume(t, s, request(member, "k6", 500))
}

func walletRevokeWithMemberHolds(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, e := walletWithCredits(t, s, 10_000, clock.Now())
	e2 := createEntitlement(t, s, credits(w, 10_000, clock.Now().Add(time.Second)))
	a, b := newAgent(), newAgent()
	addMember(t, s, w, a, "", dailyCap(500))
	addMember(t, s, w, b, "", dailyCap(500))
	ha := mustAuthorize(t, s, holdRequest(a, "h1", 400)).Hold
	hb := mustAuthorize(t, s, holdRequest(b, "h1", 300)).Hold
	if ha.EntitlementID != e.ID || hb.EntitlementID != e.ID {
		t.Fatalf("holds on %s and %s, want both on the older %s", ha.EntitlementID, hb.EntitlementID, e.ID)
	}
	revoked := must(s.RevokeEntitlement(ctx, e.ID))(t, "RevokeEntitlement(the wallet's)")
	if revoked.Status != entitlement.StatusRevoked {
		t.Fatalf("RevokeEntitlement = %s", revoked.Status)
	}
	wantHoldStatus(t, s, ha.ID, entitlement.HoldReleased, clock.Now())
	wantHoldStatus(t, s, hb.ID, entitlement.HoldReleased, clock.Now())
	_, err := s.CaptureHold(ctx, ha.ID, a, entitlement.Amount{})
	wantCode(t, "CaptureHold(released by the revoke)", err, store.CodeConflict)
	for _, m := range []string{a, b} {
		if got := getMember(t, s, w, m); len(got.Holds) != 0 || got.Caps.Spend.Spent != usd(0) {
			t.Errorf("GetMember(%s) after the revoke = holds %v, spent %v; want none", m, got.Holds, got.Caps.Spend.Spent)
		}
	}
	// What the holds reserved is room again, on the wallet's other grant.
	if got := mustConsume(t, s, request(a, "k1", 500)).Consumption; got.EntitlementID != e2.ID {
		t.Errorf("after the revoke the member's 500 went to %s, want %s", got.EntitlementID, e2.ID)
	}
}

func walletUsageAndConsumptions(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w, _ := walletWithCredits(t, s, 10_000, clock.Now())
	a, own := agentWithCredits(t, s, 10, clock.Now())
	b := newAgent()
	addMember(t, s, w, a, "", entitlement.Limits{})
	addMember(t, s, w, b, "", entitlement.Limits{})
	from := clock.Now()
	mustConsume(t, s, request(a, "a1", 10)) // its own
	clock.Advance(time.Minute)
	mustConsume(t, s, request(a, "a2", 20)) // the wallet's
	clock.Advance(time.Minute)
	mustConsume(t, s, request(b, "b1", 30))
	clock.Advance(time.Minute)
	mustConsume(t, s, request(b, "b2", 40))

	cs := listAllConsumptions(t, s, w, time.Time{})
	if len(cs) != 3 {
		t.Fatalf("ListConsumptions(wallet) = %d, want the members' 3", len(cs))
	}
	for i, want := range []string{a, b, b} {
		if cs[i].AgentID != want || cs[i].WalletID != w {
			t.Errorf("wallet's consumption %d = agent %s wallet %s, want %s, %s", i, cs[i].AgentID, cs[i].WalletID, want, w)
		}
	}
	mine := listAllConsumptions(t, s, a, time.Time{})
	if len(mine) != 2 || mine[0].EntitlementID != own.ID || mine[1].WalletID != w {
		t.Errorf("ListConsumptions(member) = %+v, want its own charge then its charge to the wallet", mine)
	}
	if since := listAllConsumptions(t, s, w, from.Add(2*time.Minute)); len(since) != 2 {
		t.Errorf("ListConsumptions(wallet, since) = %d, want 2", len(since))
	}

	q := usage.Query{AgentID: w, From: from, To: from.Add(time.Hour), GroupBy: usage.ByMember}
	buckets := usagePages(t, s, q, 1)
	if len(buckets) != 2 || buckets[0].MemberID != min(a, b) || buckets[1].MemberID != max(a, b) {
		t.Fatalf("Usage(wallet, by member) = %+v, want buckets of %s and %s", buckets, a, b)
	}
	for _, bk := range buckets {
		want := map[string]int64{a: 20, b: 70}[bk.MemberID]
		if len(bk.Amounts) != 1 || bk.Amounts[0] != usd(want) {
			t.Errorf("Usage(wallet) bucket of %s = %+v, want %d USD", bk.MemberID, bk, want)
		}
	}
	q.AgentID = a
	if got := usagePages(t, s, q, 0); len(got) != 1 || got[0].MemberID != a || got[0].Count != 2 || got[0].Amounts[0] != usd(30) {
		t.Errorf("Usage(member, by member) = %+v, want one bucket of 2 calls, 30 USD", got)
	}
	q.AgentID, q.GroupBy = w, usage.ByTool
	if got := usagePages(t, s, q, 0); len(got) != 1 || got[0].Count != 3 {
		t.Errorf("Usage(wallet, by tool) = %+v, want one bucket of 3 calls", got)
	}
	if bal := must(s.Balance(ctx, w))(t, "Balance(wallet)"); len(bal.Credits) != 1 || bal.Credits[0].Total != usd(10_000-90) {
		t.Errorf("Balance(wallet) = %+v, want its entitlement's %d USD", bal, 10_000-90)
	}
	if bal := must(s.Balance(ctx, a))(t, "Balance(member)"); len(bal.Credits) != 1 || bal.Credits[0].Total != usd(0) {
		t.Errorf("Balance(member) = %+v, want its own emptied entitlement alone", bal)
	}
}

// walletAlertsAndTopUp: a wallet's low-balance alert and its auto top-up
// work as an agent's: members' charges cross the alert (one
// entitlement.balance_low event, for the wallet), the wallet's top-up
// begins a payment of the wallet, and its grant is the wallet's, which the
// members then spend.
func walletAlertsAndTopUp(t *testing.T, s store.EntitlementStore, clock *Clock) {
	ctx := t.Context()
	w := newWallet(t, s)
	e := createEntitlement(t, s, withControls(t, credits(w, 500, clock.Now()),
		entitlement.Update{Alerts: alertsAt(entitlement.Alert{Amount: ptr(usd(200))})}, clock.Now()))
	a, b := newAgent(), newAgent()
	addMember(t, s, w, a, "", entitlement.Limits{})
	addMember(t, s, w, b, "", entitlement.Limits{})
	mustConsume(t, s, request(a, "a1", 150))
	if low := walletEvents(t, s, w, event.EntitlementBalanceLow); len(low) != 0 {
		t.Fatalf("balance_low events above the alert = %v, want none", low)
	}
	crossed := mustConsume(t, s, request(b, "b1", 200)) // 500 − 350 = 150 ≤ 200
	if !crossed.Consumption.LowBalance {
		t.Errorf("the member's charge that crossed the wallet's alert is not marked LowBalance")
	}
	mustConsume(t, s, request(a, "a2", 50))
	if low := walletEvents(t, s, w, event.EntitlementBalanceLow); len(low) != 1 || low[0]["id"] != e.ID {
		t.Errorf("balance_low events of the wallet = %v, want one for entitlement %s", low, e.ID)
	}

	if _, err := s.SaveTopUpMethod(ctx, w, topup.Method{Customer: "cus_w", PaymentMethod: "pm_w"}); err != nil {
		t.Fatalf("SaveTopUpMethod(wallet): %v", err)
	}
	if _, err := s.PutTopUp(ctx, w, topUpSettings()); err != nil {
		t.Fatalf("PutTopUp(wallet): %v", err)
	}
	p := beginTopUp(t, s, w, 0)
	if p.AgentID != w || p.ID != topup.PaymentID(w, 1) {
		t.Fatalf("the wallet's top-up began payment %s of %s, want %s of the wallet %s", p.ID, p.AgentID, topup.PaymentID(w, 1), w)
	}
	done := must(s.CompletePayment(ctx, p.ID, signing))(t, "CompletePayment(the wallet's top-up)")
	if len(done.Entitlements) != 1 || done.Entitlements[0].AgentID != w {
		t.Fatalf("the top-up granted %+v, want one entitlement of the wallet %s", done.Entitlements, w)
	}
	// The first entitlement has 100 left: a member's call of 600 is paid
	// by the top-up's grant.
	res := mustConsume(t, s, request(b, "b2", 600))
	if c := res.Consumption; c.EntitlementID != done.Entitlements[0].ID || c.WalletID != w || c.AgentID != b {
		t.Errorf("the member's charge after the top-up = entitlement %s, wallet %s, agent %s; want %s, %s, %s",
			c.EntitlementID, c.WalletID, c.AgentID, done.Entitlements[0].ID, w, b)
	}
	if _, err := s.SettleTopUp(ctx, w); err != nil {
		t.Errorf("SettleTopUp(wallet): %v", err)
	}
}
