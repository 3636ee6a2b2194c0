package firestore_test

import (
	"slices"
	"testing"

	"github.com/stipend-mcp/stipend/internal/emulator"
	"github.com/stipend-mcp/stipend/store"
	fsstore "github.com/stipend-mcp/stipend/store/firestore"
)

// twoInstances returns two stores on one fresh collection prefix.
func twoInstances(t *testing.T) (a, b *fsstore.Store) {
	t.Helper()
	prefix := emulator.Prefix(t)
	out := make([]*fsstore.Store, 2)
	for i := range out {
		out[i] = fsstore.New(emulator.Client(t), fsstore.WithCollectionPrefix(prefix))
		t.Cleanup(func() { _ = out[i].Close() })
	}
	return out[0], out[1]
}

// charged consumes cents for agent on s with key (naming no entitlement)
// and returns the entitlement charged, or "" when the call was denied.
func charged(t *testing.T, s store.EntitlementStore, agent, key string, cents int64) string {
	t.Helper()
	res, err := s.CheckAndConsume(t.Context(), consumeReq(agent, key, cents))
	switch {
	case err != nil:
		t.Fatalf("CheckAndConsume(%s, %s): %v", agent, key, err)
	case res.Outcome == store.Denied:
		return ""
	case res.Outcome != store.Consumed:
		t.Fatalf("CheckAndConsume(%s, %s) = %s, want consumed or denied", agent, key, res.Outcome)
	}
	return res.Consumption.EntitlementID
}

// wantCandidates checks the candidates document of account.
func wantCandidates(t *testing.T, s *fsstore.Store, account string, ents, wallets []string) {
	t.Helper()
	gotEnts, gotWallets, ok, err := fsstore.Candidates(t.Context(), s, account)
	if err != nil || !ok {
		t.Fatalf("Candidates(%s) = %t, %v; want a document", account, ok, err)
	}
	slices.Sort(ents)
	if !slices.Equal(gotEnts, ents) || !slices.Equal(gotWallets, wallets) {
		t.Errorf("Candidates(%s) = %v, %v; want %v, %v", account, gotEnts, gotWallets, ents, wallets)
	}
}

// TestCandidates_ChangesOnAnotherInstance: every change of what an agent
// may be charged to, made on one instance, binds the next consume on
// another at once: a grant, a revocation, a wallet joined and left.
func TestCandidates_ChangesOnAnotherInstance(t *testing.T) {
	emulator.Host(t)
	a, b := twoInstances(t)
	first := createCredits(t, a, "agent", 5)
	if got := charged(t, b, "agent", "k1", 5); got != first.ID {
		t.Fatalf("first consume charged %q, want %s", got, first.ID)
	}
	if got := charged(t, b, "agent", "k2", 5); got != "" {
		t.Fatalf("consume on an empty balance charged %s, want denied", got)
	}
	second := createCredits(t, a, "agent", 10)
	if got := charged(t, b, "agent", "k3", 5); got != second.ID {
		t.Fatalf("consume after a grant on the other instance charged %q, want %s", got, second.ID)
	}
	wantCandidates(t, a, "agent", []string{first.ID, second.ID}, nil)
	if _, err := a.RevokeEntitlement(t.Context(), second.ID); err != nil {
		t.Fatalf("RevokeEntitlement: %v", err)
	}
	if got := charged(t, b, "agent", "k4", 5); got != "" {
		t.Fatalf("consume after a revocation on the other instance charged %s, want denied", got)
	}
	wantCandidates(t, a, "agent", []string{first.ID}, nil)

	wallet := newWallet(t, a, "wallet", 100, 0, "agent")
	if got := charged(t, b, "agent", "k5", 5); got != wallet.ID {
		t.Fatalf("consume after joining a wallet on the other instance charged %q, want %s", got, wallet.ID)
	}
	wantCandidates(t, a, "agent", []string{first.ID}, []string{"wallet"})
	wantCandidates(t, a, "wallet", []string{wallet.ID}, nil)
	if _, err := a.RemoveMember(t.Context(), "wallet", "agent"); err != nil {
		t.Fatalf("RemoveMember: %v", err)
	}
	if got := charged(t, b, "agent", "k6", 5); got != "" {
		t.Fatalf("consume after leaving the wallet on the other instance charged %s, want denied", got)
	}
	wantCandidates(t, a, "agent", []string{first.ID}, nil)
}

// TestCandidates_AccountsWithoutTheDocument: an account stored before the
// candidates document existed is charged through the queries, and its
// next change writes the document whole (what was there, and the change).
func TestCandidates_AccountsWithoutTheDocument(t *testing.T) {
	emulator.Host(t)
	a, b := twoInstances(t)
	old := createCredits(t, a, "agent", 5)
	wallet := newWallet(t, a, "wallet", 100, 0, "agent")
	for _, id := range []string{"agent", "wallet"} {
		if err := fsstore.SetCandidates(t.Context(), a, id, nil, nil, true); err != nil {
			t.Fatalf("SetCandidates(%s, drop): %v", id, err)
		}
	}
	if got := charged(t, b, "agent", "k1", 5); got != old.ID {
		t.Fatalf("consume without candidates documents charged %q, want %s", got, old.ID)
	}
	if got := charged(t, b, "agent", "k2", 5); got != wallet.ID {
		t.Fatalf("consume without candidates documents charged %q, want the wallet's %s", got, wallet.ID)
	}
	if _, _, ok, err := fsstore.Candidates(t.Context(), a, "agent"); ok || err != nil {
		t.Fatalf("Candidates(agent) after consumes = %t, %v; want still none (a consume writes nothing there)", ok, err)
	}
	granted := createCredits(t, a, "agent", 5)
	wantCandidates(t, a, "agent", []string{old.ID, granted.ID}, []string{"wallet"})
	if got := charged(t, b, "agent", "k3", 5); got != granted.ID {
		t.Fatalf("consume after the grant charged %q, want %s", got, granted.ID)
	}

	// The wallet's document is written by its own next change.
	if _, _, ok, err := fsstore.Candidates(t.Context(), a, "wallet"); ok || err != nil {
		t.Fatalf("Candidates(wallet) = %t, %v; want none yet", ok, err)
	}
	more := createCredits(t, a, "wallet", 5)
	wantCandidates(t, a, "wallet", []string{wallet.ID, more.ID}, nil)
}

// TestCandidates_NamesMoreThanThere: a document naming entitlements that
// are gone, revoked or another account's, and a wallet the agent is no
// member of, charges only what the agent may be charged to.
func TestCandidates_NamesMoreThanThere(t *testing.T) {
	emulator.Host(t)
	a, b := twoInstances(t)
	own := createCredits(t, a, "agent", 5)
	revoked := createCredits(t, a, "agent", 100)
	if _, err := a.RevokeEntitlement(t.Context(), revoked.ID); err != nil {
		t.Fatalf("RevokeEntitlement: %v", err)
	}
	other := createCredits(t, a, "other", 100)
	wallet := newWallet(t, a, "wallet", 100, 0)
	ents := []string{"gone", revoked.ID, other.ID, own.ID, wallet.ID}
	if err := fsstore.SetCandidates(t.Context(), a, "agent", ents, []string{"wallet", "no-wallet"}, false); err != nil {
		t.Fatalf("SetCandidates: %v", err)
	}
	if got := charged(t, b, "agent", "k1", 5); got != own.ID {
		t.Fatalf("consume charged %q, want %s", got, own.ID)
	}
	if got := charged(t, b, "agent", "k2", 5); got != "" {
		t.Fatalf("consume charged %s, want denied: nothing else is the agent's", got)
	}
	res, err := b.Check(t.Context(), consumeReq("agent", "k3", 5))
	if err != nil || res.Outcome != store.Denied {
		t.Fatalf("Check = %s, %v; want denied", res.Outcome, err)
	}
}

// TestCandidates_NamesLessThanThere: a grant that an instance of an older
// version made without writing the candidates document (a rolling
// upgrade) is never refused: a denial is answered from the queries.
func TestCandidates_NamesLessThanThere(t *testing.T) {
	emulator.Host(t)
	a, b := twoInstances(t)
	listed := createCredits(t, a, "agent", 5)
	unlisted := createCredits(t, a, "agent", 5)
	if err := fsstore.SetCandidates(t.Context(), a, "agent", []string{listed.ID}, nil, false); err != nil {
		t.Fatalf("SetCandidates: %v", err)
	}
	if got := charged(t, b, "agent", "k1", 5); got != listed.ID {
		t.Fatalf("first consume charged %q, want the listed %s", got, listed.ID)
	}
	res, err := b.Check(t.Context(), consumeReq("agent", "k2", 5))
	if err != nil || res.Outcome != store.Allowed {
		t.Fatalf("Check = %s, %v; want allowed (the unlisted grant can pay)", res.Outcome, err)
	}
	if got := charged(t, b, "agent", "k2", 5); got != unlisted.ID {
		t.Fatalf("second consume charged %q, want the unlisted %s", got, unlisted.ID)
	}
	if got := charged(t, b, "agent", "k3", 5); got != "" {
		t.Fatalf("third consume charged %s, want denied: both are spent", got)
	}
}
