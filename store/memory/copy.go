package memory

import (
	"maps"

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
