package cluster

import (
	"context"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The top of a topology is a server with no leaf remote: the hub that the
// clusters link to, or the server of a cluster that links to no other (a
// lone server, or one that other clusters use as their hub). Its JetStream
// domain is the one every server of the topology reaches, which makes it
// the place for data that all clusters share.
//
// Every server started by this package that is a top answers a JetStream
// account-info request sent under TopAPIPrefix, from anywhere in the
// topology: it maps that one subject to its own "$JS.API.INFO", and
// nats-server advertises a mapping's subject over leaf links like a
// subscription. Servers with a leaf remote do not map it, so a request
// made through one crosses its link to the top; the reply names the top's
// domain. Nothing else of the JetStream API is exposed that way.

// TopAPIPrefix is the JetStream API prefix under which the top of a
// topology answers account-info requests ("<prefix>.INFO").
const TopAPIPrefix = "_PMIXBUS.top.API"

const (
	topInfoSubject = TopAPIPrefix + ".INFO"
	jsInfoSubject  = "$JS.API.INFO"
)

// mapTop makes ns answer TopDomain, for a server with no leaf remote.
func mapTop(ns *server.Server) error {
	if err := ns.GlobalAccount().AddMapping(topInfoSubject, jsInfoSubject); err != nil {
		return fmt.Errorf("cluster: mapping %s: %w", topInfoSubject, err)
	}
	return nil
}

// TopDomain asks the top of the topology that nc is connected to for its
// JetStream domain, once.
//
// Errors: one wrapping ErrNoTop when no top answered before ctx ended (or
// nats.go's default timeout passed): the leaf link towards it is down, or
// the top is not a server of this package (an external NATS deployment).
func TopDomain(ctx context.Context, nc *nats.Conn) (string, error) {
	js, err := jetstream.NewWithAPIPrefix(nc, TopAPIPrefix)
	if err != nil {
		return "", err
	}
	info, err := js.AccountInfo(ctx)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: %w", ErrNoTop, err)
	case info.Domain == "":
		return "", fmt.Errorf("%w: the top of the topology has no JetStream domain", ErrNoTop)
	}
	return info.Domain, nil
}

// CheckJetStream reports whether the JetStream of domain answers an
// account-info request on nc, once: nil if it does, the error nats.go gave
// otherwise (jetstream.ErrJetStreamNotEnabled when nobody answers in that
// domain).
func CheckJetStream(ctx context.Context, nc *nats.Conn, domain string) error {
	js, err := jetstream.NewWithDomain(nc, domain)
	if err != nil {
		return err
	}
	_, err = js.AccountInfo(ctx)
	return err
}
