package memory

import (
	"context"
	"time"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/topup"
)

func noAccount(agentID string) error { return store.Errorf(store.CodeNotFound, "account %q", agentID) }

// ListTopUps lists the watched top-ups by agent ID.
func (s *Store) ListTopUps(_ context.Context, p store.Page) ([]topup.TopUp, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var rows []*topup.TopUp
	for _, t := range s.topups {
		if t.Watched() {
			rows = append(rows, t)
		}
	}
	// By agent ID alone: every row has the same instant (one a cursor keeps).
	pos := func(t *topup.TopUp) position { return position{At: time.Unix(0, 0).UTC(), ID: t.AgentID} }
	return pageOf(rows, p, listID("topups"), pos, (*topup.TopUp).Clone)
}
