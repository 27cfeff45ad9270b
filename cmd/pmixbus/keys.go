package main

import (
	"context"
	"fmt"
	"io"

	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "keys",
		summary: "create the NATS keys of pmixbus's roles and show them",
		run:     runKeys,
	})
}

const keysDescription = `
Create the NATS keys of pmixbus's roles that are missing in --keys, as the
first "pmixbus server" would, and print one line per role: the role, its key
file and its public key. The roles (docs/security.md):

    agent  the agents: events, outcomes, the caches and buckets
    rm     "pmixbus notify": sends events as the RM, receives RM-range
           events and outcomes; no stream or bucket
    watch  "pmixbus watch": receives events and outcomes, sends nothing
    leaf   the leaf links between clusters

A key file is a NATS nkey seed, mode 0600: whoever can read it can sign in
as its role. Give hosts that run servers or agents the whole directory, and
a host that only watches its watch.nk alone.

With --nats-conf it prints instead the authorization block of a nats-server
configuration file that accepts the keys with their roles' permissions, for
running pmixbus on NATS servers of your own (no secret is in it).`

func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("keys", "[flags]", keysDescription)
	var (
		keys     = fs.String("keys", "", keysDirHelp)
		natsConf = fs.Bool("nats-conf", false, "print a nats-server authorization block for the keys")
	)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	dir, err := keysDir(*keys)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	k, err := security.EnsureKeys(dir)
	if err != nil {
		fmt.Fprintf(stderr, "pmixbus keys: %v\n", err)
		return exitFail
	}
	if *natsConf {
		conf, err := k.NATSConf()
		if err != nil {
			fmt.Fprintf(stderr, "pmixbus keys: %v\n", err)
			return exitFail
		}
		fmt.Fprint(stdout, conf)
		return exitOK
	}
	for _, r := range security.Roles() {
		pub, err := k.PublicKey(r)
		if err != nil {
			fmt.Fprintf(stderr, "pmixbus keys: %v\n", err)
			return exitFail
		}
		fmt.Fprintf(stdout, "%-5s %s %s\n", r, security.KeyFile(dir, r), pub)
	}
	return exitOK
}
