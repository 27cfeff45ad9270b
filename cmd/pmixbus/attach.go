package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "attach",
		summary: "show the output of a running or finished job",
		run:     runAttach,
	})
}

const attachDescription = `
Show the output of a job from its cluster's output stream (PMIXBUS_IOF):
everything its ranks wrote, from the start, in the order it was stored,
with the labels and formats of pmixbus run --output. The job is
cluster:nspace, or an nspace of the local cluster (the JetStream domain
of the server connected to). A job's output is kept for a day by default
(the agents' --iof-max-age) and up to its --iof-limit per channel.

--tail N starts with the last N lines instead. --follow goes on until
every rank's output has ended; attaching again later shows everything
again, exactly once. A job the stream holds nothing of is an error
(exit status 2).

Examples:
  pmixbus attach job-3a1b5a020a71
  pmixbus attach --output tag --follow east:job-3a1b5a020a71
  pmixbus attach --tail 20 job-3a1b5a020a71`

func runAttach(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("attach", "[flags] [cluster:]nspace", attachDescription)
	var (
		natsURL = localNATSFlag(fs, "linked to the job's cluster")
		nkey    = fs.String("nkey", defaultKeyFile(security.RoleWatch), "sign in with the NATS key in `file`; the read-only watch role's key by default (docs/security.md)")
		output  = fs.String("output", "", "how to show the output, as pmixbus run --output")
		tail    = fs.Int("tail", 0, "start with the last `N` lines")
		follow  = fs.Bool("follow", false, "go on until every rank's output has ended")
	)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() != 1 {
		return usageError(fs, stderr, "want one job, [cluster:]nspace")
	}
	jobOf, _, _ := cluster.Split(fs.Arg(0))
	if err := applyLocalNATS(fs, natsURL, string(jobOf)); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *tail < 0 {
		return usageError(fs, stderr, "--tail %d: want a number of lines", *tail)
	}
	opts, err := iof.ParseOutput(*output)
	if err != nil {
		return usageError(fs, stderr, "%v", pmix.MessageOf(err))
	}
	c, nspace, _ := cluster.Split(fs.Arg(0))
	if nspace == "" {
		return usageError(fs, stderr, "job %s: no nspace", pmix.Quote(fs.Arg(0)))
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus attach: "+format+"\n", a...)
		return exitFail
	}
	key, identity, err := toolKey(*nkey, given(fs, "nkey"))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	nc, err := connectTool(*natsURL, key, given(fs, "nkey"), stderr, "attach",
		nats.Name("pmixbus attach"), nats.Timeout(5*time.Second), nats.MaxReconnects(-1),
		nats.CustomInboxPrefix(security.WatchInboxPrefix), asyncErrors(stderr, "attach"))
	if err != nil {
		return fail("connecting to %s: %v%s (give the URL of a pmixbus NATS server with --nats or PMIXBUS_NATS)", *natsURL, err, authHint(err, identity))
	}
	defer nc.Close()
	if c == "" {
		if c, err = launch.LocalCluster(ctx, nc); err != nil {
			return fail("%v", err)
		}
	}
	if err := c.Validate(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	display, err := iof.NewDisplay(iof.Config{Options: opts, Stdout: stdout, Stderr: stderr})
	if err != nil {
		return usageError(fs, stderr, "--output: %v", pmix.MessageOf(err))
	}
	show := func(p iof.Parsed) {
		switch {
		case p.Job == iof.JobDiag:
			_, _ = stderr.Write(p.Data)
		case p.Job != "":
		default:
			if err := display.Write(p.Record); err != nil {
				fmt.Fprintf(stderr, "pmixbus attach: %v\n", err)
			}
		}
	}
	err = iof.Attach(ctx, nc, string(c), nspace, iof.AttachOptions{Tail: *tail, Follow: *follow, Bad: func(err error) {
		fmt.Fprintf(stderr, "pmixbus attach: skipped: %v\n", err)
	}}, show)
	if cerr := display.Close(); cerr != nil && err == nil {
		err = cerr
	}
	switch {
	case errors.Is(err, iof.ErrNoJob):
		fmt.Fprintf(stderr, "pmixbus attach: %v\n", err)
		return exitUsage
	case errors.Is(err, context.Canceled):
		return exitFail
	case err != nil:
		return fail("%v", err)
	}
	return 0
}
