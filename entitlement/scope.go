package entitlement

import "slices"

// AnyService is the Scope.Service that covers every service.
const AnyService = "*"

// Scope is what an entitlement may be spent on: one service (or AnyService)
// and, within it, a list of tools (empty means every tool).
type Scope struct {
	Service string   `json:"service"`
	Tools   []string `json:"tools,omitempty"`
}

// Covers reports whether a call of tool on service falls within s.
func (s Scope) Covers(service, tool string) bool {
	if s.Service != AnyService && s.Service != service {
		return false
	}
	return len(s.Tools) == 0 || slices.Contains(s.Tools, tool)
}
