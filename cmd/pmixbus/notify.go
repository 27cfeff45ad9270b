package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nuid"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "notify",
		summary: "send one event as the host RM, straight on NATS",
		run:     runNotify,
	})
}

const notifyDescription = `
Send one event as the host RM of --cluster (no source proc, as RFC0002 has
it), published straight on NATS: no agent is needed. Where it goes depends
on the range, as for an event an agent's host notifies:

    rm         the cluster's RM:                 pmix.evt.<cluster>.rm.<code>
    local      the node given by --info pmix.hname=<node>, else --node
    namespace  --nspace, or the nspace of the --affected procs
               (a cluster:nspace name goes to that cluster)
    session    --session
    custom     the --target procs: each target's nspace scope, where the
               agents filter by the target list
    global     every cluster:                    pmix.evt.global.<cluster>.<code>

A cacheable global event is stored by the events stream of --cluster, and
the other clusters source it from there: notify waits for that stream's
acknowledgement, and fails if none comes. So from the hub, which has no
stream of its own, --cluster must name a cluster whose agents run (the
event is sent as that cluster's RM); a cluster not reachable from --nats,
or whose agents never started, is an error, not a silent loss. A global
event with --no-cache is sent live only, as the other ranges are.

With --env the event is an environment event: it goes to the same range,
under pmix.env instead of pmix.evt (pmix.env.<cluster>.node.<node>.<code>,
pmix.env.global.<cluster>.<code>, …), and reaches only clients whose handlers asked
for environment events (PMIX_EVENT_ENVIRO_LEVEL). With --env the range
defaults to local. proc_local events never leave their process and cannot
be sent.

--nats, --cluster and --node may also come from PMIXBUS_NATS,
PMIXBUS_CLUSTER and PMIXBUS_NODE. It prints each subject it published to.

On a secured server (docs/security.md) it signs in with --nkey, by default
the rm key of the keys directory, which may send events but not read or
change the caches and buckets. A refused publish is an error. Without a
key file it connects without a key, which only a server without
authentication takes.
` + infoSyntax + `

For example:

    pmixbus notify --nats nats://127.0.0.1:4222 --cluster A \
        --code EVENT_PROC_TERMINATED --range namespace --nspace job1 \
        --affected job1.3 --info pmix.evtext="rank 3 died"`

var notifyEnv = envBindings{"nats": "PMIXBUS_NATS", "cluster": "PMIXBUS_CLUSTER", "node": "PMIXBUS_NODE"}

func runNotify(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("notify", "--code CODE --range RANGE [flags]", notifyDescription)
	var (
		natsURL     = localNATSFlag(fs, "of the clusters")
		clusterName = fs.String("cluster", "local", "the cluster whose RM sends the event")
		node        = fs.String("node", hostname(), "the RM's `node`: the event's source node, and the target of a local event")
		codeArg     = fs.String("code", "", "event `code`: a PMIx name (EVENT_NODE_DOWN, PMIX_EVENT_JOB_END) or a number (required)")
		rangeArg    = fs.String("range", "", "data `range`: rm, local, namespace, session, custom or global (required unless --env)")
		env         = fs.Bool("env", false, "an environment event (one that targets no job)")
		nspace      = fs.String("nspace", "", "the `nspace` of a namespace-range event (pmix.nspace)")
		session     = fs.String("session", "", "the `session` of a session-range event (pmix.session.id)")
		nonDefault  = fs.Bool("non-default", false, "skip default handlers (PMIX_EVENT_NON_DEFAULT)")
		noCache     = fs.Bool("no-cache", false, "do not cache the event (PMIX_EVENT_DO_NOT_CACHE)")
		timeout     = fs.Duration("timeout", 10*time.Second, "give up connecting and publishing after this `duration`")
		nkey        = fs.String("nkey", defaultKeyFile(security.RoleRM), "sign in with the NATS key in `file` (a role's key file, or any nkey seed file)")
		targets     stringList
		affected    stringList
		infos       stringList
	)
	fs.Var(&targets, "target", "a target `nspace.rank` of a custom-range event, rank '*' for all (repeatable)")
	fs.Var(&affected, "affected", "an affected `nspace.rank` (PMIX_EVENT_AFFECTED_PROC(S); repeatable)")
	fs.Var(&infos, "info", "an info for the handlers: `key[:type]=value` (repeatable; see above)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	if err := notifyEnv.apply(fs); err != nil {
		return usageError(fs, stderr, "%v", err)
	}

	if *natsURL == "" {
		u, err := localNATS(*clusterName)
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		*natsURL = u
	}
	id, err := cluster.ParseID(*clusterName)
	if err != nil {
		return usageError(fs, stderr, "--cluster: %v", err)
	}
	if *node == "" {
		return usageError(fs, stderr, "--node: must not be empty")
	}
	if *codeArg == "" {
		return usageError(fs, stderr, "--code: an event code is required")
	}
	code, err := pmix.ParseStatus(*codeArg)
	if err != nil {
		return usageError(fs, stderr, "--code: %v", pmix.MessageOf(err))
	}
	rng := pmix.RangeLocal
	switch {
	case *rangeArg != "":
		if rng, err = pmix.ParseRange(*rangeArg); err != nil {
			return usageError(fs, stderr, "--range: %v", pmix.MessageOf(err))
		}
	case !*env:
		return usageError(fs, stderr, "--range: a data range is required (rm, local, namespace, session, custom or global)")
	}

	var info []pmix.Info
	for _, s := range infos {
		in, err := parseInfo(s)
		if err != nil {
			return usageError(fs, stderr, "--info: %v", err)
		}
		info = append(info, in)
	}
	if *nspace != "" {
		info = append(info, pmix.NewInfo(pmix.KeyNspace, pmix.String(*nspace)))
	}
	if *session != "" {
		info = append(info, pmix.NewInfo(pmix.KeySessionID, pmix.String(*session)))
	}
	tprocs, err := parseProcs(targets)
	if err != nil {
		return usageError(fs, stderr, "--target: %v", pmix.MessageOf(err))
	}
	if len(tprocs) > 0 {
		if rng != pmix.RangeCustom {
			return usageError(fs, stderr, "--target: only a custom-range event has targets")
		}
		info = append(info, pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs(tprocs)))
	}
	aprocs, err := parseProcs(affected)
	if err != nil {
		return usageError(fs, stderr, "--affected: %v", pmix.MessageOf(err))
	}
	switch len(aprocs) {
	case 0:
	case 1:
		info = append(info, pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(aprocs[0])))
	default:
		info = append(info, pmix.NewInfo(pmix.KeyEventAffectedProcs, pmix.Procs(aprocs)))
	}
	if *nonDefault {
		info = append(info, pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true)))
	}
	if *noCache {
		info = append(info, pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)))
	}

	m := &event.Message{
		ID:          "notify." + nuid.Next(),
		Code:        code,
		Range:       rng,
		Environment: *env,
		Source:      bus.Origin{Cluster: string(id), Node: *node},
		Info:        info,
		Time:        time.Now(),
	}
	if m.Range == pmix.RangeProcLocal {
		return usageError(fs, stderr, "--range: proc_local events never leave their process; they cannot be sent")
	}
	if keys := event.MissingTarget(m, nil); keys != nil {
		return usageError(fs, stderr, "a %s event needs %s", trace.Range(rng), flagsFor(keys))
	}
	scopes, err := event.Scopes(event.Place{Cluster: id, Node: *node}, m, nil, nil)
	if err != nil {
		return usageError(fs, stderr, "%v", pmix.MessageOf(err))
	}

	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus notify: "+format+"\n", a...)
		return exitFail
	}
	subjs := make([]string, len(scopes))
	for i, sc := range scopes {
		subjs[i] = sc.Subject(code)
		if pmix.Flag(info, pmix.KeyEventDoNotCache) {
			subjs[i] = sc.TransientSubject(code)
		}
	}
	key, identity, err := toolKey(*nkey, given(fs, "nkey"))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	// A refusal ends the wait for the stream's acknowledgement at once.
	fctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	onError := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			cancel()
			return
		}
		fmt.Fprintf(stderr, "pmixbus notify: %v\n", err)
	})
	nc, err := connectTool(*natsURL, key, given(fs, "nkey"), stderr, "notify", nats.Name("pmixbus notify"), nats.Timeout(*timeout),
		nats.CustomInboxPrefix(security.RMInboxPrefix), onError)
	if err != nil {
		return fail("connecting to %s: %v%s", *natsURL, err, authHint(err, identity))
	}
	defer nc.Close()
	// As an agent publishes: the event id in a header, the transient
	// subject for an event not to be cached. A cacheable GLOBAL event,
	// which its origin's stream alone captures, waits for it to be stored.
	if rng == pmix.RangeGlobal && !*noCache {
		err = event.PublishStored(fctx, nc, m, scopes[0], string(id))
	} else {
		err = event.Publish(nc, m, scopes)
	}
	if err == nil {
		err = nc.FlushWithContext(fctx)
	}
	if err := refused(nc); err != nil {
		return fail("%v (signed in with %s; sending events takes the rm or agent key, see docs/security.md)", err, identity)
	}
	if err != nil {
		return fail("%v", pmix.MessageOf(err))
	}
	what := trace.Range(rng)
	if *env {
		what = "environment"
	}
	for _, subj := range subjs {
		fmt.Fprintf(stdout, "sent %s %s event %s to %s\n", trace.Code(code), what, m.ID, subj)
	}
	return exitOK
}

// flagsFor names, in terms of the command's flags, the attributes a range
// needs (event.MissingTarget).
func flagsFor(keys []string) string {
	flag := map[string]string{
		pmix.KeyNspace:             "--nspace",
		pmix.KeyEventAffectedProc:  "--affected procs of one nspace",
		pmix.KeyEventAffectedProcs: "",
		pmix.KeySessionID:          "--session",
		pmix.KeyEventCustomRange:   "at least one --target",
	}
	var out []string
	for _, k := range keys {
		if f := flag[k]; f != "" {
			out = append(out, f)
		}
	}
	return strings.Join(out, ", or ")
}
