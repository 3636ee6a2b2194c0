package api_test

import (
	"net/http"
	"testing"

	"github.com/stipend-mcp/stipend/api"
	"github.com/stipend-mcp/stipend/apikey"
	"github.com/stipend-mcp/stipend/entitlement"
)

func TestAccounts(t *testing.T) {
	e := newEnv(t)
	var a entitlement.Account
	e.must(http.StatusOK, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing,
		Body: map[string]any{"displayName": "Agent A", "metadata": map[string]string{"team": "x"}}}).decode(t, &a)
	if a.AgentID != agentA || a.DisplayName != "Agent A" || a.Metadata["team"] != "x" {
		t.Errorf("PUT account: got %+v", a)
	}
	var again entitlement.Account
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA, Key: e.keys.Reader}).decode(t, &again)
	if again.DisplayName != "Agent A" || !again.CreatedAt.Equal(a.CreatedAt) {
		t.Errorf("GET account: got %+v, want %+v", again, a)
	}
	big := map[string]string{}
	for i := range 33 {
		big[string(rune('a'+i%26))+string(rune('a'+i/26))] = "v"
	}
	p := e.must(http.StatusBadRequest, req{Method: "PUT", Path: "/v1/accounts/" + agentA, Key: e.keys.Billing,
		Body: map[string]any{"metadata": big}}).problem(t)
	if p.Errors[0].Field != "metadata" {
		t.Errorf("33 metadata entries: errors %+v, want metadata", p.Errors)
	}
}

func TestEntitlements_ListFilterPageRevoke(t *testing.T) {
	e := newEnv(t)
	credits := e.grantCredits(agentA, 10)
	var quota entitlement.Entitlement
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "quota", "scope": map[string]any{"service": "mail", "tools": []string{"send"}}, "limit": 5, "period": "hour"}}).decode(t, &quota)
	if quota.Quota.Remaining != 5 || quota.Quota.ResetAt.IsZero() {
		t.Errorf("granted quota: %+v", quota.Quota)
	}
	e.clock.Advance(1)
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/" + agentA + "/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "subscription", "scope": map[string]any{"service": "*"}, "validUntil": "2030-01-01T00:00:00Z"}})

	list := func(query string) (ids []string, next string) {
		t.Helper()
		var out struct {
			Items      []entitlement.Entitlement
			NextCursor string
		}
		e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/entitlements" + query, Key: e.keys.Reader}).decode(t, &out)
		for _, it := range out.Items {
			ids = append(ids, string(it.Type))
		}
		return ids, out.NextCursor
	}
	if got, _ := list("?type=quota"); len(got) != 1 || got[0] != "quota" {
		t.Errorf("?type=quota: %v", got)
	}
	if got, _ := list("?service=mail"); len(got) != 2 { // the quota and the "*" subscription
		t.Errorf("?service=mail: %v, want quota and subscription", got)
	}
	first, next := list("?limit=2")
	if len(first) != 2 || next == "" {
		t.Fatalf("?limit=2: %v next %q", first, next)
	}
	rest, last := list("?limit=2&cursor=" + next)
	if len(rest) != 1 || last != "" {
		t.Errorf("second page: %v next %q, want one item and no cursor", rest, last)
	}

	var revoked entitlement.Entitlement
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/entitlements/" + credits + "/revoke", Key: e.keys.Admin}).decode(t, &revoked)
	if revoked.Status != entitlement.StatusRevoked || revoked.RevokedAt == nil {
		t.Errorf("revoked: %+v", revoked)
	}
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/entitlements/" + credits + "/revoke", Key: e.keys.Admin})
	if got, _ := list("?status=revoked"); len(got) != 1 || got[0] != "credits" {
		t.Errorf("?status=revoked: %v", got)
	}
	for _, q := range []string{"?status=gone", "?type=coupon", "?limit=101", "?limit=x"} {
		e.must(http.StatusBadRequest, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/entitlements" + q, Key: e.keys.Reader})
	}
}

func TestConsumptions_Since(t *testing.T) {
	e := newEnv(t)
	e.grantCredits(agentA, 10)
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k1", 1)})
	e.clock.Advance(3600e9)
	e.must(http.StatusOK, req{Method: "POST", Path: "/v1/consume", Key: e.keys.Host, Body: consumeBody(agentA, "k2", 1)})
	var out struct{ Items []entitlement.Consumption }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/" + agentA + "/consumptions?since=2026-03-01T12:30:00Z", Key: e.keys.Reader}).decode(t, &out)
	if len(out.Items) != 1 || out.Items[0].IdempotencyKey != "k2" {
		t.Errorf("since: got %+v, want only k2", out.Items)
	}
}

// TestEscapedAgentID: agent IDs may hold characters that need escaping in a path.
func TestEscapedAgentID(t *testing.T) {
	e := newEnv(t)
	e.noSpec = true // the spec router matches the decoded path, which has an extra "/"
	e.must(http.StatusCreated, req{Method: "POST", Path: "/v1/accounts/a%2Fb%20c/entitlements", Key: e.keys.Admin,
		Body: map[string]any{"type": "quota", "scope": map[string]any{"service": "s"}, "limit": 1, "period": "day"}})
	var acct entitlement.Account
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/a%2Fb%20c", Key: e.keys.Admin}).decode(t, &acct)
	if acct.AgentID != "a/b c" {
		t.Errorf("agentId = %q, want %q", acct.AgentID, "a/b c")
	}
}

// TestEscapedAgentID_DecodedOnce: a path segment is unescaped exactly once,
// by authorization and handlers alike, whether or not the request's URL
// keeps a raw form. The agent "a%62" (a literal percent sign, escaped as
// "a%2562", as the Go client sends it) is not the agent "ab", and a reader
// of one never sees the other.
func TestEscapedAgentID_DecodedOnce(t *testing.T) {
	readerRaw, reader, err := apikey.Generate("reader-pct", apikey.RoleReader, []string{"a%62"})
	if err != nil {
		t.Fatal(err)
	}
	adminRaw, admin, err := apikey.Generate("admin-pct", apikey.RoleAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := apikey.NewSet([]apikey.Key{reader, admin})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *api.Config) { c.Keys = set })
	e.noSpec = true // the spec router matches decoded paths
	grant := map[string]any{"type": "quota", "scope": map[string]any{"service": "s"}, "limit": 1, "period": "day"}
	for _, path := range []string{"/v1/accounts/ab/entitlements", "/v1/accounts/a%2562/entitlements"} {
		e.must(http.StatusCreated, req{Method: "POST", Path: path, Key: adminRaw, Body: grant})
	}
	var own struct{ Items []entitlement.Entitlement }
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/a%2562/entitlements", Key: readerRaw}).decode(t, &own)
	if len(own.Items) != 1 || own.Items[0].AgentID != "a%62" {
		t.Fatalf("the reader of a%%62 listed %+v, want its one entitlement", own.Items)
	}
	for _, path := range []string{"/v1/accounts/a%62/entitlements", "/v1/accounts/ab/entitlements", "/v1/accounts/a%62"} {
		e.must(http.StatusForbidden, req{Method: "GET", Path: path, Key: readerRaw})
	}
	var acct entitlement.Account
	e.must(http.StatusOK, req{Method: "GET", Path: "/v1/accounts/a%62", Key: adminRaw}).decode(t, &acct)
	if acct.AgentID != "ab" {
		t.Errorf("GET /v1/accounts/a%%62 read agent %q, want ab (%%62 is an escaped b)", acct.AgentID)
	}
}
