package cluster

import (
	"fmt"
	"strings"
)

// MaxIDLength is the longest cluster id accepted. An id becomes a JetStream
// domain, a NATS cluster name and part of server names and subjects, so it is
// kept short.
const MaxIDLength = 64

// Separator joins a cluster id and an nspace in a multi-cluster name
// (RFC0003: "the cluster identifier shall be prepended to the nspace,
// separated by a colon").
const Separator = ":"

// ID identifies one PMIx cluster: the value of PMIX_CLUSTER_ID. Each cluster
// runs its own NATS cluster whose JetStream domain is the id itself.
//
// A valid ID is 1 to MaxIDLength bytes of ASCII letters, digits, '-' and '_'.
// In particular it never contains ':' (so a multi-cluster name can be split
// unambiguously) nor '.', '*', '>' or white space (so it is a single, literal
// NATS subject token and a valid JetStream domain).
type ID string

// ParseID returns s as an ID if it is valid.
//
// It returns an error wrapping ErrInvalidID that says what is wrong.
func ParseID(s string) (ID, error) {
	id := ID(s)
	if err := id.Validate(); err != nil {
		return "", err
	}
	return id, nil
}

// Validate reports whether id is a valid cluster id.
//
// It returns an error wrapping ErrInvalidID that names the offending byte and
// its position, or says the id is empty or too long.
func (id ID) Validate() error {
	if id == "" {
		return fmt.Errorf("%w: empty", ErrInvalidID)
	}
	if len(id) > MaxIDLength {
		return fmt.Errorf("%w: %q is %d bytes long, at most %d allowed", ErrInvalidID, string(id), len(id), MaxIDLength)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			continue
		case c == ':':
			return fmt.Errorf("%w: %q contains ':' at byte %d; ':' separates cluster id from nspace and may never appear in an id", ErrInvalidID, string(id), i)
		default:
			return fmt.Errorf("%w: %q contains %q at byte %d; only ASCII letters, digits, '-' and '_' are allowed", ErrInvalidID, string(id), c, i)
		}
	}
	return nil
}

// String returns the id itself.
func (id ID) String() string { return string(id) }

// Domain returns the JetStream domain of the cluster's NATS servers, which is
// the id itself.
func (id ID) Domain() string { return string(id) }

// Qualify returns the multi-cluster name "id:nspace" of nspace in cluster id.
//
// Qualify does not validate: for a valid id (see Validate) and any nspace,
// including one that itself contains ':', Split(Qualify(id, nspace)) returns
// id, nspace and true. An nspace that is already qualified is qualified again
// ("A" and "B:x" give "A:B:x"), since the text after the first ':' is the
// nspace, whatever it contains.
func Qualify(id ID, nspace string) string {
	return string(id) + Separator + nspace
}

// Split splits a multi-cluster name at its first ':'.
//
// A name without ':' is unqualified: Split returns "", name, false, and the
// name refers to an nspace of the local cluster. A name with a ':' is
// qualified: the text before the first ':' is the cluster id and everything
// after it, further ':' included, is the nspace. Split is purely lexical: the
// id it returns may be invalid (empty in ":x", or containing characters
// Validate rejects) and should be validated when the name came from outside.
func Split(name string) (id ID, nspace string, qualified bool) {
	before, after, found := strings.Cut(name, Separator)
	if !found {
		return "", name, false
	}
	return ID(before), after, true
}

// Local reports whether name refers to an nspace of cluster id, and returns
// that nspace: an unqualified name is local to every cluster, and a qualified
// one is local to the cluster it names.
func (id ID) Local(name string) (nspace string, ok bool) {
	cid, ns, qualified := Split(name)
	if !qualified {
		return name, true
	}
	if cid != id {
		return "", false
	}
	return ns, true
}
