package demo

import (
	"fmt"
	"slices"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
)

// This file declares what the demo sets up and sends, and derives from
// those declarations what it must see. Where an event goes is modelled
// here from docs/subjects.md (its audience); which of a client's handlers
// run, in which order and with what results is what the bus engine
// computes for the client's declared registrations, run in-process as an
// oracle (oracle.go). The demo then checks that the distributed run —
// agents in two clusters, client processes, NATS between them — gives
// exactly that.

// RoleEnv names a demo client's role in its environment: which handlers
// its process registers (RunClient).
const RoleEnv = "PMIXBUS_DEMO_ROLE"

// demoFenceKey (int) numbers the fences: events every client registers for,
// sent after each demo event from the same source. A client that ran the
// fence has run the first handler of everything that source sent before it,
// so "not delivered" is a fact, not a timeout.
const demoFenceKey = "pmixbus.demo.fence"

// The codes of the demo's events. Application codes lie below
// ExternalErrBase.
const (
	codeLocal     = pmix.ExternalErrBase - 1
	codeNamespace = pmix.ExternalErrBase - 2
	codeSession   = pmix.ExternalErrBase - 3
	codeCustom    = pmix.ExternalErrBase - 4
	codeRM        = pmix.ExternalErrBase - 6
	codeProcLocal = pmix.ExternalErrBase - 8
	codeFence     = pmix.ExternalErrBase - 99
)

// demoJob is a job of the demo: its cluster, nspace, session and the node
// of each rank. Every agent of the cluster is given the job.
type demoJob struct {
	cluster, nspace, session string
	nodes                    []string
}

// The session name is the same in both clusters: sessions are
// cluster-scoped, so a SESSION event of east stays in east.
var demoJobs = []demoJob{
	{"east", "sim", "s1", []string{"e1", "e1", "e2"}},
	{"east", "viz", "s1", []string{"e2"}},
	{"west", "post", "s1", []string{"w1", "w2"}},
}

// worldSpec declares the demo's world to agenttest: a cluster of one
// server per cluster its jobs name, an agent per node, and every job's
// clients registered for the processes the demo launches. The clusters are
// joined through a hub.
func worldSpec() agenttest.Spec {
	var spec agenttest.Spec
	for _, j := range demoJobs {
		id := cluster.ID(j.cluster)
		if !slices.ContainsFunc(spec.Clusters, func(c agenttest.Cluster) bool { return c.ID == id }) {
			spec.Clusters = append(spec.Clusters, agenttest.Cluster{ID: id})
		}
		spec.Jobs = append(spec.Jobs, agenttest.Job{Cluster: id, Nspace: j.nspace, Session: j.session, Nodes: j.nodes, Detached: true})
	}
	spec.Agent = func(c *agent.Config) { c.HandlerTimeout = 10 * time.Second }
	return spec
}

// demoClient is one client process: a proc of a demoJob and its role, which
// names its handlers in demoRoles.
type demoClient struct {
	cluster string
	proc    pmix.Proc
	role    string
}

var demoClients = []demoClient{
	{"east", pmix.Proc{Nspace: "sim", Rank: 0}, "ordered"},
	{"east", pmix.Proc{Nspace: "sim", Rank: 1}, "resolver"},
	{"east", pmix.Proc{Nspace: "sim", Rank: 2}, "filtered"},
	{"east", pmix.Proc{Nspace: "viz", Rank: 0}, "environment"},
	{"west", pmix.Proc{Nspace: "post", Rank: 0}, "terminator"},
	{"west", pmix.Proc{Nspace: "post", Rank: 1}, "plain"},
}

// key names a client across clusters: "east:sim.0".
func (c demoClient) key() string { return c.cluster + ":" + c.proc.String() }

func (c demoClient) job() demoJob {
	for _, j := range demoJobs {
		if j.cluster == c.cluster && j.nspace == c.proc.Nspace {
			return j
		}
	}
	panic("demo: no job for client " + c.key())
}

func (c demoClient) node() string { return c.job().nodes[c.proc.Rank] }

// origin is the client as an agent stamps it on its events, and as its own
// registry sees itself.
func (c demoClient) origin() bus.Origin {
	return bus.Origin{Cluster: c.cluster, Node: c.node(), Session: c.job().session, Proc: c.proc}
}

func nodeCluster(node string) string {
	for _, j := range demoJobs {
		if slices.Contains(j.nodes, node) {
			return j.cluster
		}
	}
	panic("demo: unknown node " + node)
}

func demoClientByKey(key string) (demoClient, bool) {
	for _, c := range demoClients {
		if c.key() == key {
			return c, true
		}
	}
	return demoClient{}, false
}

// demoHandler is one handler registration of a demo client: what it
// registers for and with, and what it returns when it runs.
type demoHandler struct {
	name    string
	codes   []pmix.Status // none: a default handler
	attrs   []pmix.Info   // placement and filters; the name is added
	status  pmix.Status
	results []pmix.Info
}

func (h demoHandler) info() []pmix.Info {
	return append([]pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String(h.name))}, h.attrs...)
}

func attrFlag(key string) pmix.Info { return pmix.NewInfo(key, pmix.Bool(true)) }
func attrName(key, target string) pmix.Info {
	return pmix.NewInfo(key, pmix.String(target))
}
func attrSourceRange(r pmix.Range) pmix.Info { return pmix.NewInfo(pmix.KeyRange, pmix.RangeValue(r)) }

var (
	noTermination   = pmix.NewInfo(pmix.KeyEventNoTermination, pmix.Bool(true))
	wantTermination = pmix.Required(pmix.NewInfo(pmix.KeyEventWantTermination, pmix.Bool(true)))
)

// demoRoles are the handlers of each role, in registration order.
var demoRoles = map[string][]demoHandler{
	// Every placement RFC0018 defines, in one registry.
	"ordered": {
		{name: "first", attrs: []pmix.Info{attrFlag(pmix.KeyEventHdlrFirst)}, status: pmix.EventNoActionTaken},
		{name: "last", attrs: []pmix.Info{attrFlag(pmix.KeyEventHdlrLast)}, status: pmix.EventNoActionTaken},
		{name: "log", status: pmix.EventNoActionTaken},
		{name: "audit", attrs: []pmix.Info{attrFlag(pmix.KeyEventHdlrAppend)}, status: pmix.EventNoActionTaken},
		{name: "trace", attrs: []pmix.Info{attrName(pmix.KeyEventHdlrBefore, "log")}, status: pmix.EventNoActionTaken},
		{name: "metrics", attrs: []pmix.Info{attrName(pmix.KeyEventHdlrAfter, "log")}, status: pmix.EventNoActionTaken},
		{name: "stats", attrs: []pmix.Info{attrFlag(pmix.KeyEventHdlrPrepend)}, status: pmix.EventNoActionTaken},
		{name: "restart", codes: []pmix.Status{pmix.EventProcTerminated}, status: pmix.EventPartialActionTaken},
		{name: "sync", codes: []pmix.Status{codeLocal, codeNamespace}, status: pmix.EventPartialActionTaken},
	},
	// A handler that resolves the event ends the chain (RFC0002).
	"resolver": {
		{name: "note", status: pmix.EventNoActionTaken},
		{name: "fixer", codes: []pmix.Status{codeNamespace}, status: pmix.EventActionComplete},
		{name: "node-down", codes: []pmix.Status{pmix.EventNodeDown}, status: pmix.EventPartialActionTaken},
	},
	// Receiver-side source-range filters (RFC0018).
	"filtered": {
		{name: "any", status: pmix.EventNoActionTaken},
		{name: "from-rm", attrs: []pmix.Info{attrSourceRange(pmix.RangeRM)}, status: pmix.EventNoActionTaken},
		{name: "mine", attrs: []pmix.Info{attrSourceRange(pmix.RangeNamespace)}, status: pmix.EventNoActionTaken},
	},
	// Environment events versus job events (RFC0002).
	"environment": {
		{name: "env-watch", attrs: []pmix.Info{attrFlag(pmix.KeyEventEnviroLevel)}, status: pmix.EventPartialActionTaken},
		{name: "job", attrs: []pmix.Info{attrFlag(pmix.KeyEventJobLevel)}, status: pmix.EventNoActionTaken},
	},
	// Termination decisions (RFC0018): a required WANT_TERMINATION is not
	// overridden by a later NO_TERMINATION.
	"terminator": {
		{name: "all", status: pmix.EventNoActionTaken},
		{name: "checkpoint", codes: []pmix.Status{pmix.EventProcTerminated}, status: pmix.EventPartialActionTaken, results: []pmix.Info{noTermination}},
		{name: "policy", codes: []pmix.Status{pmix.EventProcTerminated}, attrs: []pmix.Info{attrName(pmix.KeyEventHdlrAfter, "checkpoint")},
			status: pmix.EventNoActionTaken, results: []pmix.Info{wantTermination}},
		{name: "hopeful", codes: []pmix.Status{pmix.EventProcTerminated}, attrs: []pmix.Info{attrFlag(pmix.KeyEventHdlrAppend)},
			status: pmix.EventNoActionTaken, results: []pmix.Info{noTermination}},
		{name: "self", codes: []pmix.Status{codeProcLocal}, attrs: []pmix.Info{attrSourceRange(pmix.RangeProcLocal)}, status: pmix.EventPartialActionTaken},
	},
	"plain": {
		{name: "all", status: pmix.EventNoActionTaken},
	},
}

// fenceHandler is registered by every client after its role's handlers.
var fenceHandler = demoHandler{name: "fence", codes: []pmix.Status{codeFence}, status: pmix.EventNoActionTaken}

// roleHandlers returns what a client of the role registers, in order.
func roleHandlers(role string) ([]demoHandler, bool) {
	hs, ok := demoRoles[role]
	if !ok {
		return nil, false
	}
	return append(slices.Clone(hs), fenceHandler), true
}

// demoEvent is one event the demo sends: from the host RM of a node's
// cluster (fromRM, through that node's agent) or from inside a client
// process (fromClient, a demoClient key).
type demoEvent struct {
	name       string
	fromRM     string
	fromClient string
	code       pmix.Status
	rng        pmix.Range
	env        bool
	info       []pmix.Info
}

var demoEvents = []demoEvent{
	{name: "local", fromRM: "e1", code: codeLocal, rng: pmix.RangeLocal},
	{name: "namespace", fromClient: "east:sim.2", code: codeNamespace, rng: pmix.RangeNamespace},
	{name: "session", fromRM: "e2", code: codeSession, rng: pmix.RangeSession,
		info: []pmix.Info{pmix.NewInfo(pmix.KeySessionID, pmix.String("s1"))}},
	{name: "custom", fromClient: "east:sim.1", code: codeCustom, rng: pmix.RangeCustom,
		info: []pmix.Info{pmix.NewInfo(pmix.KeyEventCustomRange, pmix.Procs([]pmix.Proc{
			{Nspace: cluster.Qualify("west", "post"), Rank: 0}, {Nspace: "sim", Rank: 2}}))}},
	{name: "global", fromRM: "w1", code: pmix.EventProcTerminated, rng: pmix.RangeGlobal,
		info: []pmix.Info{pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(pmix.Proc{Nspace: "post", Rank: 1}))}},
	{name: "rm", fromClient: "west:post.1", code: codeRM, rng: pmix.RangeRM,
		info: []pmix.Info{pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("post.1 wants more memory"))}},
	{name: "environment", fromRM: "e2", code: pmix.EventNodeDown, rng: pmix.RangeLocal, env: true,
		info: []pmix.Info{pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("node e3 lost power"))}},
	{name: "proc-local", fromClient: "west:post.0", code: codeProcLocal, rng: pmix.RangeProcLocal},
}

func demoEventByName(name string) (demoEvent, bool) {
	for _, ev := range demoEvents {
		if ev.name == name {
			return ev, true
		}
	}
	return demoEvent{}, false
}

// fenceInfo is the info of fence n: it skips default handlers, so only the
// fence handler runs.
func fenceInfo(n int) []pmix.Info {
	return []pmix.Info{
		pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true)),
		pmix.NewInfo(demoFenceKey, pmix.Int64(int64(n))),
	}
}

// source is the event's source as its agent stamps it.
func (ev demoEvent) source() bus.Origin {
	if ev.fromRM != "" {
		return bus.Origin{Cluster: nodeCluster(ev.fromRM), Node: ev.fromRM}
	}
	c, ok := demoClientByKey(ev.fromClient)
	if !ok {
		panic("demo: unknown source client " + ev.fromClient)
	}
	return c.origin()
}

// title says what the event is and who sends it: "namespace: NAMESPACE
// range, code -3002, from client east:sim.2 on e2".
func (ev demoEvent) title() string {
	what := trace.Range(ev.rng) + " range"
	if ev.env {
		what = "environment event (range " + trace.Range(ev.rng) + ")"
	}
	var from string
	if ev.fromRM != "" {
		from = fmt.Sprintf("the RM of %s via agent %s", nodeCluster(ev.fromRM), ev.fromRM)
	} else {
		c, _ := demoClientByKey(ev.fromClient)
		from = fmt.Sprintf("client %s on %s", ev.fromClient, c.node())
	}
	return fmt.Sprintf("%s: %s, %s, from %s", ev.name, what, trace.Code(ev.code), from)
}

// reaches reports whether the event's range includes client c: it is
// published on the scopes package event resolves for it (the rules of
// docs/subjects.md, the same for job and environment events) and c's agent
// hands it to c. Whether c's handlers take it is the registry's business
// (filters, job and environment level, bus/doc.go).
func (ev demoEvent) reaches(c demoClient) bool {
	if ev.rng == pmix.RangeProcLocal {
		return ev.fromClient == c.key()
	}
	src := ev.source()
	m := &event.Message{Code: ev.code, Range: ev.rng, Environment: ev.env, Info: ev.info}
	var from *event.Sender
	if ev.fromClient != "" {
		from = &event.Sender{Proc: src.Proc, Session: src.Session}
	}
	scopes, err := event.Scopes(event.Place{Cluster: cluster.ID(src.Cluster), Node: src.Node}, m, from, demoJobTable(src.Cluster))
	if err != nil {
		return false
	}
	at := event.Place{Cluster: cluster.ID(c.cluster), Node: c.node()}
	for _, sc := range scopes {
		for _, mine := range event.ClientScopes(at, c.proc.Nspace, c.job().session) {
			if ev.env {
				mine = mine.Environment()
			}
			if mine.Covers(sc) && event.For(at, sc, m, c.proc, c.job().session) {
				return true
			}
		}
	}
	return false
}

// demoJobTable is the job table of an agent of cluster c.
type demoJobTable string

func (c demoJobTable) Nodes(nspace string, rank pmix.Rank) ([]string, bool) {
	for _, j := range demoJobs {
		if j.cluster != string(c) || j.nspace != nspace {
			continue
		}
		if rank == pmix.RankWildcard {
			return slices.Compact(slices.Sorted(slices.Values(j.nodes))), true
		}
		if int(rank) < len(j.nodes) {
			return []string{j.nodes[rank]}, true
		}
		return nil, true
	}
	return nil, false
}

// busEvent is the event as client c's chain sees it.
func (ev demoEvent) busEvent(c demoClient) bus.Event {
	src := ev.source()
	m := &event.Message{Code: ev.code, Source: src, Range: ev.rng, Environment: ev.env, Info: ev.info}
	return m.BusEvent(cluster.ID(c.cluster))
}
