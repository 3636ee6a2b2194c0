package firestore

import (
	"context"
	"encoding/json"
	"time"

	"cloud.google.com/go/firestore"

	"github.com/stipend-mcp/stipend/internal/fsfault"
	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

// colTopUps holds an account's top-up, one document per account (ID: the
// account's). It is kept apart from the account's own document, which
// charges may read (account-wide limits): on Firestore a transaction that
// reads a document waits for one writing it, so top-up writes would then
// slow charges down. Its fields: agentId, watched (topup.TopUp.Watched,
// what the sweep queries), createdAt (the list order) and state, the
// top-up as JSON.
const colTopUps = "topups"

func topUpFrom(snap *firestore.DocumentSnapshot) (topup.TopUp, error) {
	f := read(snap)
	agent, state := f.str("agentId"), f.str("state")
	if f.err != nil {
		return topup.TopUp{}, f.err
	}
	var t topup.TopUp
	if err := json.Unmarshal([]byte(state), &t); err != nil {
		return topup.TopUp{}, store.Wrap(store.CodeInternal, err, "top-up %s: corrupt state", snap.Ref.ID)
	}
	t.AgentID = agent
	return t, nil
}

// topUpDoc is u as stored, created at created.
func topUpDoc(u *topup.TopUp, created time.Time) (map[string]any, error) {
	state, err := json.Marshal(u)
	if err != nil {
		return nil, store.Wrap(store.CodeInternal, err, "encode top-up")
	}
	return map[string]any{"agentId": u.AgentID, "watched": u.Watched(), "createdAt": created, "state": string(state)}, nil
}

// GetTopUp implements store.TopUps.
func (s *Store) GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	snap, err := s.doc(colTopUps, agentID).Get(ctx)
	if err == nil {
		return topUpFrom(snap)
	}
	if !isNotFound(err) {
		return topup.TopUp{}, fsfault.Read(err, "get top-up")
	}
	if _, err := s.GetAccount(ctx, agentID); err != nil {
		return topup.TopUp{}, err
	}
	return topup.TopUp{AgentID: agentID}, nil
}

// ListTopUps implements store.TopUps.
func (s *Store) ListTopUps(ctx context.Context, p store.Page) ([]topup.TopUp, string, error) {
	q := s.build(qTopUpsWatched, filter{"watched", "==", true})
	return list(ctx, q, listKey(qTopUpsWatched), qTopUpsWatched.Order, p, topUpFrom)
}
