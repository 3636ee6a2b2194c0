package receipt

import (
	"slices"
	"time"
)

// Clone returns a copy of s that shares no slice or pointer with it.
func (s *Signed) Clone() Signed {
	c := *s
	c.Grants = make([]Grant, len(s.Grants))
	for i, g := range s.Grants {
		g.Scope.Tools = slices.Clone(g.Scope.Tools)
		g.ValidUntil = cloneTime(g.ValidUntil)
		g.ExpiresAt = cloneTime(g.ExpiresAt)
		c.Grants[i] = g
	}
	return c
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}
