package cluster

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"net/url"
	"slices"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Auth makes a server authenticate every client and leaf-node connection
// with a NATS nkey and authorize it by that key's permissions: a
// connection without one of the keys is refused, and a key may publish
// and subscribe only where its permissions say. A server without Auth
// accepts anyone who reaches its ports, with every permission.
//
// The servers of one topology share one Auth: every server accepts its
// Users, on its client port and on its leaf port, and every leaf link
// signs in with LeafSeed. Package security builds one from the keys of
// pmixbus's roles (security.Keys.ServerAuth).
type Auth struct {
	// Users are the nkeys the server accepts, each with its permissions
	// and the kinds of connection it may make (AllowedConnectionTypes:
	// jwt.ConnectionTypeStandard for clients, jwt.ConnectionTypeLeafnode
	// for leaf links; empty allows any). At least one.
	Users []*server.NkeyUser

	// LeafSeed is the nkey seed the server's leaf links sign in to their
	// hub with; its public key must be one of the hub's Users, allowed
	// leaf connections. Empty: the links present no key, and only a hub
	// without Auth takes them.
	LeafSeed string

	// Client signs in the connections this package opens itself, to
	// check that servers are ready: it must be one of Users, allowed to
	// request "$JS.API.INFO" and "$JS.<domain>.API.INFO" and to publish
	// and subscribe "_PMIXBUS.>" and "_INBOX.>". Required.
	Client nats.Option

	// RoutePassword authenticates the routes between the servers of one
	// routed cluster. StartCluster sets a fresh one for each cluster; a
	// server started on its own needs it only with Routes.
	RoutePassword string

	// Callout, if set, has the server ask an authorization service who a
	// connection is when it signs in with none of Users' keys (NATS's
	// auth callout, in the global account): the service may admit it
	// with permissions of its own making, signed by Callout.Issuer, or
	// refuse it. Callout.AuthUsers must list every key of Users that
	// is to keep its own permissions. Package security sets it for
	// per-job credentials (docs/security.md).
	Callout *server.AuthCallout

	// Authorizer, with Callout, is the service: the server starts it on
	// a connection of its own, in process and signed in with Client
	// (which must be allowed to subscribe to "$SYS.REQ.USER.AUTH" and to
	// publish on "$SYS._INBOX.>"), as soon as it accepts connections,
	// and closes that connection when it shuts down. Nil: the service
	// runs elsewhere (a server without it waits its auth timeout for
	// each connection that is not one of Users).
	Authorizer func(nc *nats.Conn) error
}

// routeUser is the user name routes authenticate with.
const routeUser = "pmixbus-route"

// validate reports the problems of a into p.
func (a *Auth) validate(p *problems) {
	if len(a.Users) == 0 {
		p.addf("Auth.Users: none; a server with Auth needs at least one")
	}
	for i, u := range a.Users {
		if u == nil || !nkeys.IsValidPublicUserKey(u.Nkey) {
			p.addf("Auth.Users[%d]: not a user nkey", i)
		}
	}
	if a.LeafSeed != "" {
		if kp, err := nkeys.FromSeed([]byte(a.LeafSeed)); err != nil {
			p.addf("Auth.LeafSeed: %v", err)
		} else if pub, _ := kp.PublicKey(); !nkeys.IsValidPublicUserKey(pub) {
			p.addf("Auth.LeafSeed: not the seed of a user nkey")
		}
	}
	if a.Client == nil {
		p.addf("Auth.Client: nil; the server's readiness checks need to sign in")
	}
	if c := a.Callout; c != nil && !nkeys.IsValidPublicAccountKey(c.Issuer) {
		p.addf("Auth.Callout.Issuer: not an account nkey")
	}
	if a.Authorizer != nil && a.Callout == nil {
		p.addf("Auth.Authorizer: set without Auth.Callout")
	}
}

// apply configures opts, whose routes and leaf remotes are set already.
func (a *Auth) apply(opts *server.Options) {
	opts.Nkeys = slices.Clone(a.Users)
	if a.Callout != nil {
		c := *a.Callout
		c.AuthUsers = slices.Clone(c.AuthUsers)
		if c.Account == "" {
			c.Account = server.DEFAULT_GLOBAL_ACCOUNT
		}
		opts.AuthCallout = &c
	}
	for _, r := range opts.LeafNode.Remotes {
		r.Nkey = a.LeafSeed
	}
	if opts.Cluster.Port != 0 {
		opts.Cluster.Username = routeUser
		opts.Cluster.Password = a.RoutePassword
		for i, r := range opts.Routes {
			u := *r
			u.User = url.UserPassword(routeUser, a.RoutePassword)
			opts.Routes[i] = &u
		}
	}
}

// clientOptions are the options of the package's own connections to a
// server with auth (nil for none).
func (a *Auth) clientOptions() []nats.Option {
	if a == nil {
		return nil
	}
	return []nats.Option{a.Client}
}

// withRoutePassword returns a copy of a with a fresh route password, or
// nil for nil.
func (a *Auth) withRoutePassword() (*Auth, error) {
	if a == nil {
		return nil, nil
	}
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("cluster: route password: %w", err)
	}
	c := *a
	c.RoutePassword = base64.RawURLEncoding.EncodeToString(b)
	return &c, nil
}
