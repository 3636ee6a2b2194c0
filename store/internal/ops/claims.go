package ops

import (
	"context"
	"errors"
	"time"

	"github.com/stipend-mcp/stipend/store"
	"github.com/stipend-mcp/stipend/store/internal/unit"
)

// ClaimJob is store.Claimer.ClaimJob.
func (o Shared) ClaimJob(ctx context.Context, name, owner string, until time.Time) (won bool, err error) {
	if name == "" || owner == "" {
		return false, store.Errorf(store.CodeInvalid, "claim: a name and an owner are required")
	}
	err = o.run(ctx, "claim job", func(tx unit.Tx) error {
		won = false
		c, err := tx.Claim(name)
		exists := err == nil
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if exists && c.Owner != owner && tx.Now().Before(c.Until) {
			return nil // another instance's turn
		}
		won = true
		tx.PutClaim(store.Claim{Name: name, Owner: owner, Until: until}, exists)
		return nil
	})
	return won, err
}
