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

// qTopUpsWatched lists the top-ups a sweep looks at.
var qTopUpsWatched = Query{
	Name: "topups.watched", Collection: colTopUps,
	Equal: []string{"watched"}, Order: "createdAt",
}

func (s *Store) topUpRef(agentID string) *firestore.DocumentRef {
	return s.col(colTopUps).Doc(docID(agentID))
}

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

// txTopUp reads the top-up of agentID inside tx. exists is false for an
// account with none stored yet; an unknown account is ErrNotFound.
func (s *Store) txTopUp(tx *firestore.Transaction, agentID string) (t topup.TopUp, created time.Time, exists bool, err error) {
	snap, err := tx.Get(s.topUpRef(agentID))
	switch {
	case err == nil:
		t, err = topUpFrom(snap)
		f := read(snap)
		created = f.instant("createdAt")
		if err == nil {
			err = f.err
		}
		return t, created, true, err
	case !isNotFound(err):
		return t, created, false, err
	}
	if _, err := tx.Get(s.col(colAccounts).Doc(docID(agentID))); err != nil {
		if isNotFound(err) {
			return t, created, false, store.Errorf(store.CodeNotFound, "account %q", agentID)
		}
		return t, created, false, err
	}
	return topup.TopUp{AgentID: agentID}, created, false, nil
}

func (s *Store) writeTopUp(tx *firestore.Transaction, t *topup.TopUp, created time.Time) error {
	state, err := json.Marshal(t)
	if err != nil {
		return store.Wrap(store.CodeInternal, err, "encode top-up")
	}
	return tx.Set(s.topUpRef(t.AgentID), map[string]any{
		"agentId": t.AgentID, "watched": t.Watched(), "createdAt": created, "state": string(state),
	})
}

// GetTopUp implements store.TopUps.
func (s *Store) GetTopUp(ctx context.Context, agentID string) (topup.TopUp, error) {
	snap, err := s.topUpRef(agentID).Get(ctx)
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
