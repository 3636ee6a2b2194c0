package receipt

import (
	"slices"

	"github.com/stipend-mcp/stipend/entitlement"
)

// Clone returns a copy of s that shares no slice or pointer with it.
func (s *Signed) Clone() Signed {
	c := *s
	c.Grants = make([]Grant, len(s.Grants))
	for i, g := range s.Grants {
		g.Scope.Tools = slices.Clone(g.Scope.Tools)
		g.ValidUntil = entitlement.ClonePtr(g.ValidUntil)
		g.ExpiresAt = entitlement.ClonePtr(g.ExpiresAt)
		c.Grants[i] = g
	}
	return c
}
