package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/publishlookup"
)

func init() {
	register(&command{
		name:    "publish",
		summary: "publish data as a PMIx client (PMIx_Publish)",
		run:     runPublish,
	})
	register(&command{
		name:    "lookup",
		summary: "look published data up as a PMIx client (PMIx_Lookup)",
		run:     runLookup,
	})
	register(&command{
		name:    "unpublish",
		summary: "remove data this client published (PMIx_Unpublish)",
		run:     runUnpublish,
	})
}

// publishLookupIdentity documents how the three commands attach.
const publishLookupIdentity = `
The command runs as a PMIx client: it attaches to its agent with the
identity the agent issued (PMIX_NAMESPACE, PMIX_RANK, PMIXBUS_AGENT and
PMIXBUS_CREDENTIAL in the environment, as "pmixbus agent --client" prints
them), and the agent stamps that identity on what it publishes. One process
at a time may hold an identity.`

const publishDescription = `
Publish data, as PMIx_Publish does: each argument is one key and its value,
key=value for a string or key:type=value (the --info syntax below). A key is
taken in its range scope: publishing it again in the same scope, by anyone,
fails with PMIX_ERR_DUPLICATE_KEY (and nothing of the call is published).

The data lives as --persistence says: app (the default) until the job is
deregistered, session until the session's last job is, indef until
unpublished, first_read until one lookup has read it; proc data goes as
soon as this command detaches, which makes it of little use here.
` + publishLookupIdentity + "\n" + infoSyntax + `

For example, RFC0003's rendezvous from cluster A:

    pmixbus publish --range global myrendezvouskey=A:job1

GLOBAL data lives in the JetStream domain of the hub, which the agent found
when it started (see "pmixbus agent -h"); while the hub is cut off, a GLOBAL
publish fails with PMIX_ERR_UNREACH.`

const lookupDescription = `
Look keys up, as PMIx_Lookup does, and print one line per value found:

    <key>=<value> (published by <proc>)

the publisher's nspace qualified "cluster:nspace" when it runs in another
cluster; with --json, one JSON object per value. It exits 0 when every key
was found, 1 otherwise (after printing what was found and the PMIx status on
stderr, with the keys not found): PMIX_ERR_NOT_FOUND when none was,
PMIX_ERR_PARTIAL_SUCCESS when some were, PMIX_ERR_NO_PERMISSIONS,
PMIX_ERR_TIMEOUT, PMIX_ERR_UNREACH when a key could be where the agent
cannot reach (GLOBAL data while the hub is cut off), ...

--wait waits until that many of the keys are published (0: all of them),
woken by the publish itself; --timeout bounds it.
` + publishLookupIdentity

const unpublishDescription = `
Remove what this client published under the keys given, or everything it
published when none is given, as PMIx_Unpublish does: from the scope of
--range, or from every scope. Only the publisher may unpublish: a key
published by another process is PMIX_ERR_NO_PERMISSIONS, one published by
nobody (or unpublished already) PMIX_ERR_NOT_FOUND.
` + publishLookupIdentity

// attachClient attaches as the client the environment names. An identity
// another process holds is refused at once (client.ErrAlreadyAttached);
// one whose previous holder finalized is free when its Finalize returned.
func attachClient(ctx context.Context, timeout time.Duration) (*client.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return client.Init(ctx)
}

// finish finalizes c, reporting a failure only if the command succeeded.
func finish(c *client.Client, code int, fail func(string, ...any) int) int {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := c.Finalize(ctx); err != nil && code == exitOK {
		return fail("finalize: %v", err)
	}
	return code
}

func failer(name string, stderr io.Writer) func(string, ...any) int {
	return func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus "+name+": "+format+"\n", a...)
		return exitFail
	}
}

// rangeFlag parses --range for data: local, namespace, session, global or
// custom; "" leaves it out.
func rangeFlag(s string) (*pmix.Info, error) {
	if s == "" {
		return nil, nil
	}
	r, err := pmix.ParseRange(s)
	if err != nil {
		return nil, errors.New(pmix.MessageOf(err))
	}
	in := pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(r))
	return &in, nil
}

func timeoutInfo(d time.Duration) pmix.Info {
	secs := int32(max(1, (d+time.Second-1)/time.Second))
	return pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(secs))
}

func runPublish(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("publish", "[flags] key=value ...", publishDescription)
	var (
		rangeArg    = fs.String("range", "", "data `range`: local, namespace, session (the default), global or custom")
		persistArg  = fs.String("persistence", "", "`persistence`: indef, first_read, proc, app (the default) or session")
		uids        = fs.String("access-uids", "", "comma-separated user `ids` that may read (PMIX_ACCESS_USERIDS); default: only this user and group")
		gids        = fs.String("access-gids", "", "comma-separated group `ids` that may read (PMIX_ACCESS_GRPIDS)")
		timeout     = fs.Duration("timeout", 10*time.Second, "give up after this `duration`")
		customProcs stringList
	)
	fs.Var(&customProcs, "custom", "a `nspace.rank` that may read, with --range custom; cluster:nspace for another cluster, rank '*' for all (repeatable)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "nothing to publish: give key=value arguments")
	}
	var infos []pmix.Info
	for _, a := range fs.Args() {
		in, err := parseInfo(a)
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		infos = append(infos, in)
	}
	rng, err := rangeFlag(*rangeArg)
	if err != nil {
		return usageError(fs, stderr, "--range: %v", err)
	}
	if rng != nil {
		infos = append(infos, *rng)
	}
	if *persistArg != "" {
		p, err := pmix.ParsePersistence(*persistArg)
		if err != nil {
			return usageError(fs, stderr, "--persistence: %v", pmix.MessageOf(err))
		}
		infos = append(infos, pmix.NewInfo(pmix.KeyPersistence, pmix.PersistValue(p)))
	}
	var perms []pmix.Info
	if *uids != "" {
		perms = append(perms, pmix.NewInfo(pmix.KeyAccessUserIDs, pmix.String(*uids)))
	}
	if *gids != "" {
		perms = append(perms, pmix.NewInfo(pmix.KeyAccessGroupIDs, pmix.String(*gids)))
	}
	if len(perms) > 0 {
		infos = append(infos, pmix.NewInfo(pmix.KeyAccessPermissions, pmix.Infos(perms)))
	}
	procs, err := parseProcs(customProcs)
	if err != nil {
		return usageError(fs, stderr, "--custom: %v", pmix.MessageOf(err))
	}
	if len(procs) > 0 {
		infos = append(infos, pmix.NewInfo(publishlookup.KeyCustomRange, pmix.Procs(procs)))
	}
	if *timeout <= 0 {
		return usageError(fs, stderr, "--timeout: %v; want a positive duration", *timeout)
	}
	infos = append(infos, timeoutInfo(*timeout))

	fail := failer("publish", stderr)
	c, err := attachClient(ctx, *timeout)
	if err != nil {
		return fail("%v", err)
	}
	code := exitOK
	rctx, cancel := context.WithTimeout(ctx, *timeout+time.Second)
	defer cancel()
	if err := c.Publish(rctx, infos); err != nil {
		code = fail("%v", err)
	} else {
		for _, in := range infos[:fs.NArg()] {
			fmt.Fprintf(stdout, "published %s as %s\n", in.Key, c.Proc())
		}
	}
	return finish(c, code, fail)
}

func runLookup(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("lookup", "[flags] key ...", lookupDescription)
	var (
		rangeArg    = fs.String("range", "", "accept only publishers within this `range` of this client: local, namespace, session, global or custom; default any")
		wait        = fs.String("wait", "", "wait until `n` keys are found (0 or all: every key); default: answer at once")
		timeout     = fs.Duration("timeout", 10*time.Second, "give up after this `duration` (with --wait, PMIX_TIMEOUT in whole seconds)")
		asJSON      = fs.Bool("json", false, "print one JSON object per value")
		customProcs stringList
	)
	fs.Var(&customProcs, "custom", "a publisher `nspace.rank` to accept, with --range custom (repeatable)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if fs.NArg() == 0 {
		return usageError(fs, stderr, "no keys to look up")
	}
	var directives []pmix.Info
	rng, err := rangeFlag(*rangeArg)
	if err != nil {
		return usageError(fs, stderr, "--range: %v", err)
	}
	if rng != nil {
		directives = append(directives, *rng)
	}
	switch strings.ToLower(*wait) {
	case "":
	case "all":
		directives = append(directives, pmix.NewInfo(pmix.KeyWait, pmix.Int32(0)))
	default:
		n, err := strconv.ParseUint(*wait, 10, 31)
		if err != nil {
			return usageError(fs, stderr, "--wait %q: want a number of keys, or all", *wait)
		}
		directives = append(directives, pmix.NewInfo(pmix.KeyWait, pmix.Int32(int32(n))))
	}
	procs, err := parseProcs(customProcs)
	if err != nil {
		return usageError(fs, stderr, "--custom: %v", pmix.MessageOf(err))
	}
	if len(procs) > 0 {
		directives = append(directives, pmix.NewInfo(publishlookup.KeyCustomRange, pmix.Procs(procs)))
	}
	if *timeout <= 0 {
		return usageError(fs, stderr, "--timeout: %v; want a positive duration", *timeout)
	}
	if *wait != "" {
		directives = append(directives, timeoutInfo(*timeout))
	}

	fail := failer("lookup", stderr)
	c, err := attachClient(ctx, *timeout)
	if err != nil {
		return fail("%v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, *timeout+2*time.Second)
	defer cancel()
	found, err := c.Lookup(rctx, fs.Args(), directives)
	for _, d := range found {
		printPData(stdout, d, *asJSON)
	}
	code := exitOK
	if err != nil {
		code = fail("%v", err)
	}
	return finish(c, code, fail)
}

func printPData(w io.Writer, d client.PData, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(map[string]any{
			"key": d.Key, "value": d.Value.GoValue(), "type": d.Value.Type().String(), "proc": d.Proc.String(),
		})
		fmt.Fprintf(w, "%s\n", b)
		return
	}
	v := d.Value.String()
	if s, ok := d.Value.Str(); ok {
		v = s
	}
	fmt.Fprintf(w, "%s=%s (published by %s)\n", d.Key, v, d.Proc)
}

func runUnpublish(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("unpublish", "[flags] [key ...]", unpublishDescription)
	var (
		rangeArg = fs.String("range", "", "only from this `range`'s scope; default every range")
		timeout  = fs.Duration("timeout", 10*time.Second, "give up after this `duration`")
	)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	var directives []pmix.Info
	rng, err := rangeFlag(*rangeArg)
	if err != nil {
		return usageError(fs, stderr, "--range: %v", err)
	}
	if rng != nil {
		directives = append(directives, *rng)
	}
	if *timeout <= 0 {
		return usageError(fs, stderr, "--timeout: %v; want a positive duration", *timeout)
	}
	directives = append(directives, timeoutInfo(*timeout))
	fail := failer("unpublish", stderr)
	c, err := attachClient(ctx, *timeout)
	if err != nil {
		return fail("%v", err)
	}
	rctx, cancel := context.WithTimeout(ctx, *timeout+time.Second)
	defer cancel()
	code := exitOK
	if err := c.Unpublish(rctx, fs.Args(), directives); err != nil {
		code = fail("%v", err)
	} else if fs.NArg() == 0 {
		fmt.Fprintf(stdout, "unpublished everything %s published\n", c.Proc())
	} else {
		fmt.Fprintf(stdout, "unpublished %s\n", strings.Join(fs.Args(), " "))
	}
	return finish(c, code, fail)
}
