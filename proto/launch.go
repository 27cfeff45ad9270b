package proto

import (
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

// The environment a launched process finds: what an agent's host gives it
// (agent.RegisterClient) and client.Init reads (docs/protocol.md, "Launch
// environment").
const (
	EnvNspace     = "PMIX_NAMESPACE"
	EnvRank       = "PMIX_RANK"
	EnvAgent      = "PMIXBUS_AGENT"      // the agent's address, see ParseAddr
	EnvCredential = "PMIXBUS_CREDENTIAL" // hex; the agent checks it at attach
)

// ParseAddr splits an agent's address, "unix:/path/to.sock" or
// "tcp:host:port", into a network and an address for net.Dial or
// net.Listen.
//
// Errors: pmix.ErrBadParam naming the address and the two forms.
func ParseAddr(s string) (network, addr string, err error) {
	network, addr, ok := strings.Cut(s, ":")
	if !ok || addr == "" || (network != "unix" && network != "tcp") {
		return "", "", pmix.Errorf(pmix.ErrBadParam, "agent address %q: want unix:/path or tcp:host:port", s)
	}
	return network, addr, nil
}
