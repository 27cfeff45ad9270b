package subjects

import (
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

// Token escaping. Bytes in [A-Za-z0-9_-] stand for themselves; every other
// byte becomes '=' and two upper-case hex digits ("job.1" → "job=2E1").
// The empty name is the token "=", which no other name produces. The
// alphabet is also valid for JetStream KV keys, so the same tokens serve in
// bucket keys.

const hexDigits = "0123456789ABCDEF"

func plain(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// EscapeToken returns a NATS subject token for an arbitrary name.
func EscapeToken(name string) string {
	if name == "" {
		return "="
	}
	n := 0
	for i := 0; i < len(name); i++ {
		if !plain(name[i]) {
			n++
		}
	}
	if n == 0 {
		return name
	}
	var b strings.Builder
	b.Grow(len(name) + 2*n)
	for i := 0; i < len(name); i++ {
		c := name[i]
		if plain(c) {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('=')
		b.WriteByte(hexDigits[c>>4])
		b.WriteByte(hexDigits[c&0xF])
	}
	return b.String()
}

// UnescapeToken reverses EscapeToken. It accepts any escaping of a byte
// (also "=41" for 'A') but returns ErrBadParam for a token that holds a byte
// outside the alphabet or a malformed escape.
func UnescapeToken(tok string) (string, error) {
	if tok == "=" {
		return "", nil
	}
	if tok == "" {
		return "", pmix.Errorf(pmix.ErrBadParam, "empty subject token")
	}
	if !strings.Contains(tok, "=") {
		for i := 0; i < len(tok); i++ {
			if !plain(tok[i]) {
				return "", pmix.Errorf(pmix.ErrBadParam, "subject token %q: byte %q at %d is not allowed", tok, tok[i], i)
			}
		}
		return tok, nil
	}
	var b strings.Builder
	b.Grow(len(tok))
	for i := 0; i < len(tok); i++ {
		c := tok[i]
		switch {
		case plain(c):
			b.WriteByte(c)
		case c == '=' && i+2 < len(tok) && unhex(tok[i+1]) >= 0 && unhex(tok[i+2]) >= 0:
			b.WriteByte(byte(unhex(tok[i+1])<<4 | unhex(tok[i+2])))
			i += 2
		default:
			return "", pmix.Errorf(pmix.ErrBadParam, "subject token %q: bad escape at %d", tok, i)
		}
	}
	return b.String(), nil
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	}
	return -1
}

// ClusterToken escapes a cluster name for the position after "pmix.evt.".
// The name "global" gets its first byte escaped ("=67lobal"), so that no
// cluster's subjects fall under the global prefix.
func ClusterToken(cluster string) string {
	if cluster == globalToken {
		return "=67" + cluster[1:]
	}
	return EscapeToken(cluster)
}

// Unescaped is UnescapeToken's name, or tok itself when it is no escaped
// token (a key someone else wrote): for messages and lookups that must not
// fail.
func Unescaped(tok string) string {
	if s, err := UnescapeToken(tok); err == nil {
		return s
	}
	return tok
}
