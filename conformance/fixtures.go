package conformance

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/google/uuid"

	"github.com/stipend-mcp/stipend/entitlement"
	"github.com/stipend-mcp/stipend/event"
	"github.com/stipend-mcp/stipend/money"
	"github.com/stipend-mcp/stipend/payment"
	"github.com/stipend-mcp/stipend/receipt"
	"github.com/stipend-mcp/stipend/store"
)

// The service and tool most tests call.
const (
	testService = "search"
	testTool    = "query"
)

// equate treats nil and empty maps and slices alike, and ignores the stored
// fingerprints of a consumption and a hold (backends differ there and the
// contract does not say) and an entitlement's registry of open holds, which
// the compared Held views show.
var equate = cmp.Options{
	cmpopts.EquateEmpty(),
	cmpopts.IgnoreFields(entitlement.Consumption{}, "Fingerprint", "LowBalance"),
	cmpopts.IgnoreFields(entitlement.Hold{}, "Fingerprint"),
	cmpopts.IgnoreFields(entitlement.Entitlement{}, "Holds"),
	cmpopts.IgnoreFields(payment.Payment{}, "IdempotencyKey", "Fingerprint"),
}

// must fails the test, naming the call (a format and its arguments), when
// err is set, and otherwise returns v: the one shape of every fixture that
// calls a backend and cannot go on without its answer, as in
//
//	return must(s.GetEntitlement(t.Context(), id))(t, "GetEntitlement(%s)", id)
func must[T any](v T, err error) func(t testing.TB, call string, args ...any) T {
	return func(t testing.TB, call string, args ...any) T {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", fmt.Sprintf(call, args...), err)
		}
		return v
	}
}

// allPages reads a listing page by page from the first, in pages of limit
// (0: the backend's default): list answers the page and the next cursor
// ("" after the last page). It fails the test, naming call, on an error, on
// a page larger than its limit, and when the listing takes more than
// maxPages pages (the cursor is not advancing); it returns every item in
// order and the number of pages read.
func allPages[T any](t testing.TB, call string, limit, maxPages int, list func(store.Page) ([]T, string, error)) ([]T, int) {
	t.Helper()
	var out []T
	page := store.Page{Limit: limit}
	for pages := 1; pages <= maxPages; pages++ {
		items, next, err := list(page)
		if err != nil {
			t.Fatalf("%s (page %d, cursor %q): %v", call, pages, page.Cursor, err)
		}
		if limit > 0 && len(items) > limit {
			t.Fatalf("%s (limit %d) returned %d items", call, limit, len(items))
		}
		out = append(out, items...)
		if next == "" {
			return out, pages
		}
		page.Cursor = next
	}
	t.Fatalf("%s: more than %d pages; is the cursor advancing?", call, maxPages)
	return nil, 0
}

// errOf returns the error of a call whose answer does not matter.
func errOf[T any](_ T, err error) error { return err }

func usd(cents int64) money.Money { return money.Money{Cents: cents, Currency: "USD"} }

func ptr[T any](v T) *T { return &v }

// newAgent returns an agent ID unique to the calling test.
func newAgent() string { return "agent-" + uuid.NewString()[:8] }

// credits returns an active credits entitlement of cents USD on service, created now.
func credits(agentID string, cents int64, now time.Time) entitlement.Entitlement {
	return entitlement.Entitlement{
		ID: uuid.NewString(), AgentID: agentID, Type: entitlement.TypeCredits,
		Scope: entitlement.Scope{Service: testService}, Status: entitlement.StatusActive, CreatedAt: now,
		Credits: entitlement.Credits{Balance: usd(cents), Granted: usd(cents)},
	}
}

// quota returns an active daily quota of limit calls on service, anchored now.
func quota(agentID string, limit int64, now time.Time) entitlement.Entitlement {
	return entitlement.Entitlement{
		ID: uuid.NewString(), AgentID: agentID, Type: entitlement.TypeQuota,
		Scope: entitlement.Scope{Service: testService}, Status: entitlement.StatusActive, CreatedAt: now,
		Quota: entitlement.Quota{
			Limit: limit, Period: entitlement.PeriodDay, Remaining: limit,
			Anchor: now, ResetAt: entitlement.PeriodDay.NextBoundary(now, now),
		},
	}
}

// subscription returns an active subscription on service valid for 30 days from now.
func subscription(agentID string, now time.Time) entitlement.Entitlement {
	return entitlement.Entitlement{
		ID: uuid.NewString(), AgentID: agentID, Type: entitlement.TypeSubscription,
		Scope: entitlement.Scope{Service: testService}, Status: entitlement.StatusActive, CreatedAt: now,
		Subscription: entitlement.Subscription{ValidFrom: now, ValidUntil: ptr(now.Add(30 * 24 * time.Hour))},
	}
}

// request returns a consume request on service/tool costing cents USD.
func request(agentID, key string, cents int64) entitlement.ConsumeRequest {
	return entitlement.ConsumeRequest{
		AgentID: agentID, Service: testService, Tool: testTool, IdempotencyKey: key, Cost: ptr(usd(cents)),
	}
}

// subscriptionFirst begins a case of selection: it creates one of each
// (oneOfEach) for a new agent, fails unless the first call (call names it;
// pick makes it with a key and answers the entitlement it chose) goes to
// the subscription, and revokes the subscription.
func subscriptionFirst(t *testing.T, s store.EntitlementStore, now time.Time, call string, pick func(agent, key string) string) (agent string, c, q entitlement.Entitlement) {
	t.Helper()
	agent = newAgent()
	c, q, sub := oneOfEach(t, s, agent, now)
	if got := pick(agent, "1"); got != sub.ID {
		t.Errorf("first %s on %s, want the subscription %s", call, got, sub.ID)
	}
	revoke(t, s, sub.ID)
	return agent, c, q
}

// agentWithCredits creates, for a new agent, a credits entitlement of
// cents USD created at now: how most consume and hold cases begin.
func agentWithCredits(t *testing.T, s store.EntitlementStore, cents int64, now time.Time) (string, entitlement.Entitlement) {
	t.Helper()
	agent := newAgent()
	return agent, createEntitlement(t, s, credits(agent, cents, now))
}

// agentWithQuota creates, for a new agent, a daily quota of limit calls
// anchored at now.
func agentWithQuota(t *testing.T, s store.EntitlementStore, limit int64, now time.Time) (string, entitlement.Entitlement) {
	t.Helper()
	agent := newAgent()
	return agent, createEntitlement(t, s, quota(agent, limit, now))
}

// unitsRequest returns a consume request on service/tool of units and no
// cost, which only a quota can pay.
func unitsRequest(agentID, key string, units int64) entitlement.ConsumeRequest {
	r := request(agentID, key, 0)
	r.Cost, r.Units = nil, units
	return r
}

func createEntitlement(t *testing.T, s store.EntitlementStore, e entitlement.Entitlement) entitlement.Entitlement {
	t.Helper()
	return must(s.CreateEntitlement(t.Context(), e))(t, "CreateEntitlement(%s %s)", e.Type, e.ID)
}

func getEntitlement(t *testing.T, s store.EntitlementStore, id string) entitlement.Entitlement {
	t.Helper()
	return must(s.GetEntitlement(t.Context(), id))(t, "GetEntitlement(%s)", id)
}

// wantEntitlement fails unless the entitlement a call answered (call names
// it) and the stored one are both want.
func wantEntitlement(t *testing.T, s store.EntitlementStore, call string, want, answered entitlement.Entitlement) {
	t.Helper()
	if d := cmpDiff(want, answered); d != "" {
		t.Errorf("%s: answered entitlement mismatch (-want +got):\n%s", call, d)
	}
	if d := cmpDiff(want, getEntitlement(t, s, want.ID)); d != "" {
		t.Errorf("after %s: stored entitlement mismatch (-want +got):\n%s", call, d)
	}
}

// revoke revokes entitlement id and fails the test on an error.
func revoke(t *testing.T, s store.EntitlementStore, id string) entitlement.Entitlement {
	t.Helper()
	return must(s.RevokeEntitlement(t.Context(), id))(t, "RevokeEntitlement(%s)", id)
}

// oneOfEach creates a credits entitlement, a quota of one unit and a
// subscription for agent, in that order (so age alone would pick the
// credits).
func oneOfEach(t *testing.T, s store.EntitlementStore, agent string, now time.Time) (c, q, sub entitlement.Entitlement) {
	t.Helper()
	c = createEntitlement(t, s, credits(agent, 1000, now.Add(-2*time.Hour)))
	q = createEntitlement(t, s, quota(agent, 1, now.Add(-time.Hour)))
	sub = createEntitlement(t, s, subscription(agent, now))
	return c, q, sub
}

func checkAndConsume(t *testing.T, s store.EntitlementStore, req entitlement.ConsumeRequest) store.ConsumeResult {
	t.Helper()
	return must(s.CheckAndConsume(t.Context(), req))(t, "CheckAndConsume(key %q)", req.IdempotencyKey)
}

// mustConsume consumes and fails the test unless the outcome is Consumed.
func mustConsume(t *testing.T, s store.EntitlementStore, req entitlement.ConsumeRequest) store.ConsumeResult {
	t.Helper()
	res := checkAndConsume(t, s, req)
	consumeAnswer(req, res).mustGrant(t, store.Consumed, "consumption")
	return res
}

// answer is what CheckAndConsume and Authorize both answer, for the checks
// the two share: the call (with its key), the outcome, the id of what a
// granted call made (a consumption, a hold), the entitlement it charged
// and the denials of a denied one.
type answer struct {
	call          string
	outcome       store.Outcome
	made          string
	entitlementID string
	denials       []entitlement.Denial
}

func consumeAnswer(req entitlement.ConsumeRequest, res store.ConsumeResult) answer {
	return answer{fmt.Sprintf("CheckAndConsume(key %q)", req.IdempotencyKey), res.Outcome, res.Consumption.ID, res.Entitlement.ID, res.Denials}
}

func holdAnswer(req entitlement.HoldRequest, res store.HoldResult) answer {
	return answer{fmt.Sprintf("Authorize(key %q)", req.IdempotencyKey), res.Outcome, res.Hold.ID, res.Entitlement.ID, res.Denials}
}

// mustGrant fails the test unless the answer is want with what it made
// (named by what) and the entitlement it charged.
func (a answer) mustGrant(t *testing.T, want store.Outcome, what string) {
	t.Helper()
	if a.outcome != want || a.made == "" || a.entitlementID == "" {
		t.Fatalf("%s = %s %+v, want %s with %s and entitlement", a.call, a.outcome, a.denials, want, what)
	}
}

// wantDenied fails unless the answer is a denial with exactly want (in
// any order) and made nothing.
func (a answer) wantDenied(t *testing.T, want []entitlement.Denial) {
	t.Helper()
	if a.outcome != store.Denied || a.made != "" {
		t.Errorf("%s = %s, want %s %v", a.call, a.outcome, store.Denied, want)
		return
	}
	if d := cmpDiff(want, a.denials, sortDenials); d != "" {
		t.Errorf("%s denials mismatch (-want +got):\n%s", a.call, d)
	}
}

// wantCode reports a failure unless err is a *store.Error with code want;
// call names the call that returned err. It uses t.Errorf, so the checks
// after it still run.
func wantCode(t testing.TB, call string, err error, want store.Code) {
	t.Helper()
	if got := store.CodeOf(err); got != want {
		t.Errorf("%s: got error %v (code %q), want code %q", call, err, got, want)
		return
	}
	// CodeOf also says CodeInternal for an error that is not a *store.Error.
	var se *store.Error
	if err != nil && !errors.As(err, &se) {
		t.Errorf("%s: got error %v of type %T, want a *store.Error", call, err, err)
	}
}

// pendingEvents returns every undispatched event (tests write fewer than
// store.MaxPageSize).
func pendingEvents(t *testing.T, s store.EntitlementStore) []event.Event {
	t.Helper()
	return must(s.PendingEvents(t.Context(), store.MaxPageSize))(t, "PendingEvents")
}

// depletedEvents counts the pending entitlement.depleted events of the
// entitlement id.
func depletedEvents(t *testing.T, s store.EntitlementStore, id string) int {
	t.Helper()
	n := 0
	for _, e := range pendingEvents(t, s) {
		if e.Type == event.EntitlementDepleted && eventData(t, e)["id"] == id {
			n++
		}
	}
	return n
}

// eventTypes returns the types of evs, in order.
func eventTypes(evs []event.Event) []event.Type {
	out := make([]event.Type, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// eventData decodes the JSON object of e into a map, failing the test if it is not one.
func eventData(t *testing.T, e event.Event) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil || m == nil {
		t.Fatalf("event %s %s: data %s is not a JSON object: %v", e.Type, e.ID, e.Data, err)
	}
	return m
}

// fakeSign is a pure SignFunc: a JWS-shaped string derived from the
// receipt's JSON. It stands in for the real signer, which package receipt
// tests on its own.
func fakeSign(r receipt.Receipt) (string, error) {
	payload, err := json.Marshal(r)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(payload)
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"none","typ":"test"}`)) + "." + enc.EncodeToString(payload) + "." + enc.EncodeToString(sum[:]), nil
}

// cmpDiff compares with go-cmp, treating empty and nil alike.
func cmpDiff(want, got any, opts ...cmp.Option) string {
	return cmp.Diff(want, got, append(opts, equate)...)
}

// sortDenials compares lists of denials in any order.
var sortDenials = cmpopts.SortSlices(func(a, b entitlement.Denial) bool {
	if a.EntitlementID != b.EntitlementID {
		return a.EntitlementID < b.EntitlementID
	}
	return a.Reason < b.Reason
})

// sortEventTypes compares lists of event types in any order.
var sortEventTypes = cmpopts.SortSlices(func(a, b event.Type) bool { return a < b })

// eventIDs returns the IDs of evs.
func eventIDs(evs []event.Event) []string {
	ids := make([]string, len(evs))
	for i, e := range evs {
		ids[i] = e.ID
	}
	return ids
}
