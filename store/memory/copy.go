package memory

import (
	"maps"
	"time"

	"github.com/stipend-mcp/stipend/entitlement"
)

// The copy functions return values that share no maps, slices or pointers
// with stored state, so callers may change them freely.

func copyAccount(a *entitlement.Account) entitlement.Account {
	c := *a
	c.Metadata = maps.Clone(a.Metadata)
	c.Limits = a.Limits.Clone()
	return c
}

// utc returns t in UTC, leaving the zero time alone.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.UTC()
}
