package security

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// NATSConf returns the authorization block of a nats-server configuration
// file that accepts the keys of k, each with its role's permissions and
// connection kinds, as the servers of package cluster do with ServerAuth:
// for running pmixbus on NATS servers of one's own. It holds public keys
// only; a leaf remote of such a server signs in with the seed of the leaf
// key ("nkey" in its remotes entry). Its auth_callout block has the
// servers ask who any other connection is, which the agents answer
// (JobAuthority): a launcher's job credential.
//
// Errors: one wrapping ErrNoKey when k lacks a role.
func (k *Keys) NATSConf() (string, error) {
	auth, err := k.ServerAuth()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	b.WriteString("# pmixbus's roles (docs/security.md), from \"pmixbus keys --nats-conf\".\n")
	b.WriteString("# Leaf connections sign in as the leaf role: keep no leafnodes { authorization } block.\n")
	b.WriteString("authorization {\n  users = [\n")
	for i, u := range auth.Users {
		fmt.Fprintf(&b, "    # %s\n    {\n      nkey: %s\n      permissions: {\n", Roles()[i], strconv.Quote(u.Nkey))
		writeSubjectPermission(&b, "publish", u.Permissions.Publish)
		writeSubjectPermission(&b, "subscribe", u.Permissions.Subscribe)
		if r := u.Permissions.Response; r != nil {
			fmt.Fprintf(&b, "        allow_responses: { max: %d, expires: %s }\n", r.MaxMsgs, strconv.Quote(r.Expires.String()))
		}
		fmt.Fprintf(&b, "      }\n      allowed_connection_types: %s\n    }\n", quoteList(slices.Sorted(maps.Keys(u.AllowedConnectionTypes))))
	}
	b.WriteString("  ]\n")
	if c := auth.Callout; c != nil {
		b.WriteString("  # Any other sign-in is a launcher's job credential: the agents answer.\n")
		fmt.Fprintf(&b, "  auth_callout {\n    issuer: %s\n    account: %s\n    auth_users: %s\n  }\n",
			strconv.Quote(c.Issuer), strconv.Quote(c.Account), quoteList(c.AuthUsers))
	}
	b.WriteString("}\n")
	return b.String(), nil
}

func writeSubjectPermission(b *strings.Builder, name string, p *server.SubjectPermission) {
	if p == nil {
		return
	}
	fmt.Fprintf(b, "        %s: {", name)
	sep := " "
	if len(p.Allow) > 0 {
		fmt.Fprintf(b, "%sallow: %s", sep, quoteList(p.Allow))
		sep = ", "
	}
	if len(p.Deny) > 0 {
		fmt.Fprintf(b, "%sdeny: %s", sep, quoteList(p.Deny))
	}
	b.WriteString(" }\n")
}

func quoteList(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return "[" + strings.Join(q, ", ") + "]"
}
