package pmix

import "strings"

// Directive holds an Info's flags (pmix_info_directives_t).
type Directive uint32

// InfoRequired is PMIX_INFO_REQD: the receiver must honour this info or fail
// the operation; for PMIX_EVENT_WANT_TERMINATION it also means no later
// handler may override the request.
const InfoRequired Directive = 0x00000001

// Info is one key/value pair with directives (pmix_info_t).
type Info struct {
	Key   string
	Value Value
	Flags Directive
}

// NewInfo returns an Info with no flags.
func NewInfo(key string, v Value) Info { return Info{Key: key, Value: v} }

// Required returns i with InfoRequired set.
func Required(i Info) Info { i.Flags |= InfoRequired; return i }

// IsRequired reports whether InfoRequired is set.
func (i Info) IsRequired() bool { return i.Flags&InfoRequired != 0 }

// Equal reports whether i and o have the same key, flags and value.
func (i Info) Equal(o Info) bool {
	return i.Key == o.Key && i.Flags == o.Flags && i.Value.Equal(o.Value)
}

// String formats i as key=value, with a trailing "!" when required.
func (i Info) String() string {
	s := i.Key + "=" + i.Value.String()
	if i.IsRequired() {
		s += "!"
	}
	return s
}

// InfosEqual reports whether two Info slices are equal element by element.
func InfosEqual(a, b []Info) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !a[k].Equal(b[k]) {
			return false
		}
	}
	return true
}

// FormatInfos formats infos as space-separated key=value pairs.
func FormatInfos(infos []Info) string {
	parts := make([]string, len(infos))
	for k, i := range infos {
		parts[k] = i.String()
	}
	return strings.Join(parts, " ")
}

// Lookup returns the first info with the given key.
func Lookup(infos []Info, key string) (Info, bool) {
	for _, i := range infos {
		if i.Key == key {
			return i, true
		}
	}
	return Info{}, false
}

// LookupValue returns the value of the first info with the given key.
func LookupValue(infos []Info, key string) (Value, bool) {
	i, ok := Lookup(infos, key)
	return i.Value, ok
}

// Flag reports whether infos hold key as a true bool, the PMIx convention for
// flag attributes. A flag key given with no value (TypeUndef) also counts as
// true, as OpenPMIx's PMIX_INFO_TRUE does.
func Flag(infos []Info, key string) bool {
	v, ok := LookupValue(infos, key)
	if !ok {
		return false
	}
	if v.IsUndef() {
		return true
	}
	b, isBool := v.Bool()
	return isBool && b
}
