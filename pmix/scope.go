package pmix

import "strconv"

// Scope is who may read a value PMIx_Put stored (pmix_scope_t).
type Scope uint8

// Scopes, with OpenPMIx's values.
const (
	ScopeUndef    Scope = 0
	ScopeLocal    Scope = 1 // procs on the same node as the putter
	ScopeRemote   Scope = 2 // procs on other nodes
	ScopeGlobal   Scope = 3 // every proc
	ScopeInternal Scope = 4 // the putter's own data store only
)

var scopeNames = [...]string{
	ScopeUndef:    "PMIX_SCOPE_UNDEF",
	ScopeLocal:    "PMIX_LOCAL",
	ScopeRemote:   "PMIX_REMOTE",
	ScopeGlobal:   "PMIX_GLOBAL",
	ScopeInternal: "PMIX_INTERNAL",
}

// String returns the PMIx name, e.g. "PMIX_REMOTE".
func (s Scope) String() string {
	if int(s) < len(scopeNames) {
		return scopeNames[s]
	}
	return "PMIX_SCOPE(" + strconv.Itoa(int(s)) + ")"
}

// Valid reports whether s is one of LOCAL … INTERNAL.
func (s Scope) Valid() bool { return s >= ScopeLocal && s <= ScopeInternal }

// Reaches reports whether a value put with scope s by a proc on one node
// may be read by a proc on another node (sameNode false) or the same node.
// INTERNAL data never leaves the putter, which reads it without asking.
func (s Scope) Reaches(sameNode bool) bool {
	switch s {
	case ScopeLocal:
		return sameNode
	case ScopeRemote:
		return !sameNode
	case ScopeGlobal:
		return true
	}
	return false
}
