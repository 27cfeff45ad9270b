package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
	"github.com/pmixbus/pmixbus/subjects"
)

func init() {
	register(&command{
		name:    "watch",
		summary: "print the events (and chain outcomes) passing on NATS",
		run:     runWatch,
	})
}

const watchDescription = `
Print every event published on NATS (pmix.evt.> and, for environment
events, pmix.env.>), one line each: the time
it was sent, subject, code, range, source, targets and info. With
--outcomes, also the outcome of every handler chain the agents run
(pmix.outcome.>): the client, the handlers in the order they ran with their
statuses, and the termination decision. With --json each is one JSON object
per line, "kind" telling "event" from "outcome".

--job cluster:nspace first prints the job's PMIX_EVENT_JOB_END from the
event cache when the job has ended (pmixbus run raises it, cached): a
watcher started late still learns how the job ended.

--cluster narrows to one cluster's scopes and the global events that reach
it (and its agents' outcomes); --range prints only events of that range
(rm, local, namespace, session, custom, global, or env for environment
events); --subject replaces the event subjects subscribed to.

It runs until interrupted, or until it has printed --count messages. Once
subscribed it says so on stderr. --nats may also come from PMIXBUS_NATS;
without either it is the local agent's embedded server.

On a secured server (docs/security.md) it signs in with --nkey, by default
the read-only watch key of the keys directory; the agent key works too.
Without a key file it connects without a key, which only a server without
authentication takes.`

func runWatch(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch", "[flags]", watchDescription)
	var (
		natsURL     = localNATSFlag(fs, "of the clusters")
		clusterName = fs.String("cluster", "", "watch this `cluster` only")
		rangeArg    = fs.String("range", "", "print only events of this `range` (or env)")
		outcomes    = fs.Bool("outcomes", false, "print chain outcomes too")
		asJSON      = fs.Bool("json", false, "print one JSON object per line")
		count       = fs.Int("count", 0, "exit after printing `n` messages; 0 runs until interrupted")
		nkey        = fs.String("nkey", defaultKeyFile(security.RoleWatch), "sign in with the NATS key in `file` (a role's key file, or any nkey seed file)")
		job         = fs.String("job", "", "first print the cached PMIX_EVENT_JOB_END of job `cluster:nspace`, if it has ended")
		subjectList stringList
	)
	fs.Var(&subjectList, "subject", "subscribe to this event `subject` (wildcards allowed) instead of pmix.evt.> and pmix.env.> (repeatable)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	if err := applyLocalNATS(fs, natsURL, ""); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *count < 0 {
		return usageError(fs, stderr, "--count: %d is negative", *count)
	}
	keep := func(*event.Message) bool { return true }
	switch strings.ToLower(*rangeArg) {
	case "":
	case "env", "environment":
		keep = func(m *event.Message) bool { return m.Environment }
	default:
		r, err := pmix.ParseRange(*rangeArg)
		if err != nil {
			return usageError(fs, stderr, "--range: %v", pmix.MessageOf(err))
		}
		keep = func(m *event.Message) bool { return !m.Environment && m.Range == r }
	}
	evSubjects := []string(subjectList)
	outSubject := "pmix.outcome.>"
	if *clusterName != "" {
		id, err := cluster.ParseID(*clusterName)
		if err != nil {
			return usageError(fs, stderr, "--cluster: %v", err)
		}
		if len(evSubjects) == 0 {
			c := "." + subjects.ClusterToken(string(id)) + ".>"
			evSubjects = []string{
				subjects.Prefix + c, subjects.Global().Wildcard(),
				subjects.EnvPrefix + c, subjects.Global().Environment().Wildcard(),
			}
		}
		outSubject = "pmix.outcome." + subjects.ClusterToken(string(id)) + ".*"
	}
	if len(evSubjects) == 0 {
		evSubjects = []string{subjects.Prefix + ".>", subjects.EnvPrefix + ".>"}
	}

	key, identity, err := toolKey(*nkey, given(fs, "nkey"))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	nc, err := connectTool(*natsURL, key, given(fs, "nkey"), stderr, "watch", nats.Name("pmixbus watch"), nats.MaxReconnects(-1), asyncErrors(stderr, "watch"))
	if err != nil {
		fmt.Fprintf(stderr, "pmixbus watch: connecting to %s: %v%s\n", *natsURL, err, authHint(err, identity))
		return exitFail
	}
	defer nc.Close()
	msgs := make(chan *nats.Msg, 4096)
	all := evSubjects
	if *outcomes {
		all = append(all[:len(all):len(all)], outSubject)
	}
	for _, s := range all {
		sub, err := nc.ChanSubscribe(s, msgs)
		if err != nil {
			return usageError(fs, stderr, "--subject %q: %v", s, err)
		}
		_ = sub.SetPendingLimits(-1, -1)
	}
	if err := nc.Flush(); err != nil {
		fmt.Fprintf(stderr, "pmixbus watch: subscribing: %v\n", err)
		return exitFail
	}
	if err := refused(nc); err != nil {
		fmt.Fprintf(stderr, "pmixbus watch: subscribing: %v (signed in with %s; watching takes the watch or agent key, see docs/security.md)\n", err, identity)
		return exitFail
	}
	fmt.Fprintf(stderr, "pmixbus watch: subscribed to %s\n", strings.Join(all, " "))

	p := &watchPrinter{w: stdout, json: *asJSON}
	printed := 0
	if *job != "" {
		jc, ns, qualified := cluster.Split(*job)
		if !qualified || ns == "" {
			return usageError(fs, stderr, "--job %q: want cluster:nspace", *job)
		}
		subj, m, err := launch.CachedJobEnd(ctx, nc, jc, ns)
		switch {
		case err != nil:
			fmt.Fprintf(stderr, "pmixbus watch: the end of %s: %v\n", *job, err)
		case m != nil:
			if err := p.event(subj, m); err != nil {
				fmt.Fprintf(stderr, "pmixbus watch: %v\n", err)
			}
			printed++
			if *count > 0 && printed >= *count {
				return exitOK
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case msg := <-msgs:
			var err error
			shown := 0
			if strings.HasPrefix(msg.Subject, "pmix.outcome.") {
				// A message carries a batch of reports.
				var rs []event.OutcomeReport
				if rs, err = event.UnmarshalOutcomes(msg.Data); err == nil {
					for i := range rs {
						if *count > 0 && printed+shown >= *count {
							break
						}
						if err = p.outcome(msg.Subject, &rs[i]); err != nil {
							break
						}
						shown++
					}
				}
			} else {
				var m *event.Message
				if m, err = event.UnmarshalMessage(msg.Data); err == nil && keep(m) {
					err = p.event(msg.Subject, m)
					shown = 1
				}
			}
			if err != nil {
				fmt.Fprintf(stderr, "pmixbus watch: %s: %v\n", msg.Subject, err)
				continue
			}
			printed += shown
			if *count > 0 && printed >= *count {
				return exitOK
			}
		}
	}
}

// watchPrinter prints events and outcomes as lines or JSON.
type watchPrinter struct {
	w    io.Writer
	json bool
}

func (p *watchPrinter) emit(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(p.w, "%s\n", b)
	return err
}

// eventJSON is an event as --json prints it.
type eventJSON struct {
	Kind        string     `json:"kind"` // "event"
	Time        time.Time  `json:"time"`
	Subject     string     `json:"subject"`
	ID          string     `json:"id"`
	Code        int32      `json:"code"`
	CodeName    string     `json:"code_name"`
	Range       string     `json:"range"`
	Environment bool       `json:"environment"`
	Source      sourceJSON `json:"source"`
	Targets     []string   `json:"targets,omitempty"`
	Info        []infoJSON `json:"info,omitempty"`
}

type sourceJSON struct {
	Cluster string `json:"cluster"`
	Node    string `json:"node"`
	Session string `json:"session,omitempty"`
	Proc    string `json:"proc,omitempty"` // empty: the host RM
}

type infoJSON struct {
	Key      string `json:"key"`
	Type     string `json:"type"`
	Value    any    `json:"value"`
	Required bool   `json:"required,omitempty"`
}

func infosJSON(infos []pmix.Info) []infoJSON {
	out := make([]infoJSON, len(infos))
	for i, in := range infos {
		out[i] = infoJSON{Key: in.Key, Type: in.Value.Type().String(), Value: valueJSON(in.Value), Required: in.IsRequired()}
	}
	return out
}

// valueJSON is a value as JSON shows it: scalars as themselves, PMIx enums
// by name, procs as "nspace.rank".
func valueJSON(v pmix.Value) any {
	switch v.Type() {
	case pmix.TypeBool, pmix.TypeString, pmix.TypeInt8, pmix.TypeInt16, pmix.TypeInt32, pmix.TypeInt64,
		pmix.TypeUint8, pmix.TypeUint16, pmix.TypeUint32, pmix.TypeUint64, pmix.TypeFloat64, pmix.TypeBytes, pmix.TypeTime:
		return v.GoValue()
	case pmix.TypeProcArray:
		ps, _ := v.Procs()
		return procStrings(ps)
	case pmix.TypeInfoArray:
		is, _ := v.Infos()
		return infosJSON(is)
	}
	return v.String()
}

func procStrings(ps []pmix.Proc) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}

func (p *watchPrinter) event(subject string, m *event.Message) error {
	if p.json {
		return p.emit(eventJSON{
			Kind: "event", Time: m.Time, Subject: subject, ID: m.ID,
			Code: int32(m.Code), CodeName: m.Code.String(), Range: m.Range.String(), Environment: m.Environment,
			Source:  sourceJSON{Cluster: m.Source.Cluster, Node: m.Source.Node, Session: m.Source.Session, Proc: trace.Proc(m.Source.Proc)},
			Targets: procStrings(m.Targets), Info: infosJSON(m.Info),
		})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s %s", m.Time.Format("15:04:05.000"), subject, trace.Code(m.Code), trace.Range(m.Range))
	if m.Environment {
		b.WriteString(" environment")
	}
	fmt.Fprintf(&b, " from %s", trace.Origin(m.Source))
	if len(m.Targets) > 0 {
		fmt.Fprintf(&b, " to %s", strings.Join(procStrings(m.Targets), ","))
	}
	if len(m.Info) > 0 {
		fmt.Fprintf(&b, " info: %s", pmix.FormatInfos(m.Info))
	}
	_, err := fmt.Fprintln(p.w, b.String())
	return err
}

// outcomeJSON is a chain outcome as --json prints it.
type outcomeJSON struct {
	Kind                string     `json:"kind"` // "outcome"
	Time                time.Time  `json:"time"` // when it was received
	Subject             string     `json:"subject"`
	EventID             string     `json:"event_id"`
	Cluster             string     `json:"cluster"`
	Node                string     `json:"node"`
	Client              string     `json:"client"`
	Source              string     `json:"source,omitempty"` // empty: the host RM
	Code                int32      `json:"code"`
	CodeName            string     `json:"code_name"`
	Status              string     `json:"status"`
	Completed           bool       `json:"completed"`
	Resolved            bool       `json:"resolved"`
	Termination         string     `json:"termination"`
	TerminationRequired bool       `json:"termination_required,omitempty"`
	TerminationBy       string     `json:"termination_by,omitempty"`
	Ran                 []ranJSON  `json:"ran"`
	Results             []infoJSON `json:"results,omitempty"`
}

type ranJSON struct {
	Name     string `json:"name"`
	Status   string `json:"status"`
	TimedOut bool   `json:"timed_out,omitempty"`
}

func (p *watchPrinter) outcome(subject string, r *event.OutcomeReport) error {
	o := r.Outcome
	if p.json {
		ran := make([]ranJSON, len(o.Ran))
		for i, x := range o.Ran {
			ran[i] = ranJSON{Name: trace.Handler(x), Status: x.Status.String(), TimedOut: x.TimedOut}
		}
		return p.emit(outcomeJSON{
			Kind: "outcome", Time: time.Now(), Subject: subject, EventID: r.EventID,
			Cluster: r.Cluster, Node: r.Node, Client: r.Client.String(), Source: trace.Proc(r.Source),
			Code: int32(o.Code), CodeName: o.Code.String(), Status: o.Status.String(),
			Completed: o.Completed, Resolved: o.Resolved,
			Termination: o.Termination.Decision.String(), TerminationRequired: o.Termination.Required, TerminationBy: o.Termination.ByName,
			Ran: ran, Results: infosJSON(o.Results),
		})
	}
	src := "RM"
	if !r.Source.IsZero() {
		src = r.Source.String()
	}
	_, err := fmt.Fprintf(p.w, "%s %s outcome %s %s/%s %s from %s: %s\n", time.Now().Format("15:04:05.000"), subject,
		trace.Code(o.Code), r.Cluster, r.Node, r.Client, src, trace.Chain(o))
	return err
}
