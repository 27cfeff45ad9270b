package subjects

import "github.com/pmixbus/pmixbus/pmix"

// A NATS server takes a protocol line (PUB, HPUB, SUB: the subject, a reply
// subject and sizes) of at most 4096 bytes. A longer one is answered with
// "maximum control line exceeded", and the server closes the connection:
// for an agent, every client's events and lookups stop, and what they see
// is "connection closed". Names and keys are therefore bounded where they
// enter, and subjects checked before they are sent.
const (
	// MaxNameLen is the most bytes of a name made into a subject token: a
	// node, an nspace (PMIX_MAX_NSLEN) or a session. Escaped, a name can
	// triple; at this length every subject and KV key built from names and
	// a key (PMIX_MAX_KEYLEN, 511 bytes) stays within MaxSubjectLen.
	MaxNameLen = pmix.MaxNspaceLen

	// MaxSubjectLen is the longest subject pmixbus sends, leaving room in
	// the protocol line for a reply subject, a JetStream API prefix and
	// the sizes.
	MaxSubjectLen = 3584
)

// CheckName returns an error with pmix.ErrBadParam for a name over
// MaxNameLen bytes, what naming it: "nspace too long: 3000 bytes, at most
// 255 (…)".
func CheckName(what, name string) error {
	if len(name) > MaxNameLen {
		return pmix.Errorf(pmix.ErrBadParam, "%s too long: %d bytes, at most %d (%s)", what, len(name), MaxNameLen, pmix.Quote(name))
	}
	return nil
}

// CheckSubject returns an error with pmix.ErrBadParam for a subject over
// MaxSubjectLen bytes, which a NATS server would refuse by dropping the
// connection.
func CheckSubject(subject string) error {
	if len(subject) > MaxSubjectLen {
		return pmix.Errorf(pmix.ErrBadParam, "subject too long: %d bytes, at most %d (%s)", len(subject), MaxSubjectLen, pmix.Quote(subject))
	}
	return nil
}
