package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

func init() {
	register(&command{
		name:    "status",
		summary: "print the clusters reachable, their agents and the jobs they host",
		run:     runStatus,
	})
}

const statusDescription = `
Print the clusters reachable through a NATS server and their agents, from
each cluster's PMIXBUS_AGENTS bucket: for every agent its node, state,
slots, slots used (0 until agents launch processes), the age of its last
beat (the last refresh of its liveness key), version, where it listens,
and the jobs its node hosts with their ranks. A node whose key expired is
listed as down for a while (the bucket's marker TTL, 5 minutes by
default); one whose agent stopped cleanly is not listed.

The clusters are those one of whose agents answers on pmix.ctl.clusters
within --wait, and those named with --cluster (read even when no agent of
them answers). --nats may also come from PMIXBUS_NATS; the default is the
NATS server of the local agent (of --cluster when there are several). With --json it prints one JSON object.

It exits 1 when no cluster was found or a cluster's bucket could not be
read.`

// statusJSON is what --json prints.
type statusJSON struct {
	Clusters []clusterStatusJSON `json:"clusters"`
}

type clusterStatusJSON struct {
	Cluster cluster.ID        `json:"cluster"`
	Domain  string            `json:"domain"`
	Error   string            `json:"error,omitempty"`
	Agents  []agentStatusJSON `json:"agents"`
}

type agentStatusJSON struct {
	Node  string `json:"node"`
	State string `json:"state"` // up, down
	// At is the last beat (up) or when the key expired (down); AgeS is
	// how long ago, in seconds.
	At       time.Time            `json:"at"`
	AgeS     float64              `json:"age_s"`
	Slots    int                  `json:"slots"`
	Used     int                  `json:"used"`
	Version  string               `json:"version,omitempty"`
	Listen   string               `json:"listen,omitempty"`
	Started  *time.Time           `json:"started,omitempty"`
	TTLMS    int64                `json:"ttl_ms,omitempty"`
	Jobs     []liveness.HostedJob `json:"jobs"`
	Revision uint64               `json:"revision"`
	// Launched are the jobs the agent's launch service runs, with their
	// ranks' states (pmixbus run).
	Launched []launch.JobState `json:"launched,omitempty"`
}

func runStatus(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "[--nats URL] [flags]", statusDescription)
	var (
		natsURL  = localNATSFlag(fs, "of the topology")
		asJSON   = fs.Bool("json", false, "print one JSON object")
		wait     = fs.Duration("wait", time.Second, "how long to wait for the clusters to answer")
		nkey     = fs.String("nkey", defaultKeyFile(security.RoleWatch), "sign in with the NATS key in `file`; the read-only watch role's key by default (docs/security.md)")
		clusters stringList
	)
	fs.Var(&clusters, "cluster", "read this `cluster`'s agents even if none of them answers (repeatable)")
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	only := ""
	if len(clusters) == 1 {
		only = clusters[0]
	}
	if err := applyLocalNATS(fs, natsURL, only); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *wait <= 0 {
		return usageError(fs, stderr, "--wait: %v; want a positive duration", *wait)
	}
	named := map[cluster.ID]bool{}
	for _, c := range clusters {
		id, err := cluster.ParseID(c)
		if err != nil {
			return usageError(fs, stderr, "--cluster: %v", err)
		}
		named[id] = true
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus status: "+format+"\n", a...)
		return exitFail
	}
	key, identity, err := toolKey(*nkey, given(fs, "nkey"))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	nc, err := connectTool(*natsURL, key, given(fs, "nkey"), stderr, "status",
		nats.Name("pmixbus status"), nats.Timeout(5*time.Second), nats.CustomInboxPrefix(security.WatchInboxPrefix), asyncErrors(stderr, "status"))
	if err != nil {
		return fail("connecting to %s: %v%s (give the URL of a pmixbus NATS server with --nats or PMIXBUS_NATS)", *natsURL, err, authHint(err, identity))
	}
	defer nc.Close()
	found, err := liveness.Clusters(ctx, nc, *wait)
	if err != nil {
		return fail("%s", pmix.MessageOf(err))
	}
	for _, ci := range found {
		named[ci.Cluster] = true
	}
	if len(named) == 0 {
		return fail("no pmixbus agent answered through %s within %v (is an agent running, linked to this server?)", *natsURL, *wait)
	}
	ids := make([]cluster.ID, 0, len(named))
	for id := range named {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	now := time.Now()
	var out statusJSON
	code := exitOK
	for _, id := range ids {
		cs := clusterStatusJSON{Cluster: id, Domain: id.Domain(), Agents: []agentStatusJSON{}}
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		entries, err := liveness.ReadAgents(rctx, nc, id)
		cancel()
		if err != nil {
			cs.Error = pmix.MessageOf(err)
			code = exitFail
		}
		for _, e := range entries {
			if e.State == liveness.Stopped {
				continue
			}
			as := agentStatus(e, now)
			if e.State == liveness.Up {
				var reply launch.JobsReply
				rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				if err := launch.Control(rctx, nc, id, e.Node, launch.OpJobs, nil, &reply); err == nil {
					as.Launched = reply.Jobs
				}
				cancel()
			}
			cs.Agents = append(cs.Agents, as)
		}
		out.Clusters = append(out.Clusters, cs)
	}
	if *asJSON {
		b, err := json.Marshal(out)
		if err != nil {
			return fail("%v", err)
		}
		fmt.Fprintf(stdout, "%s\n", b)
		return code
	}
	printStatus(stdout, out)
	return code
}

// agentStatus is an entry as status prints it.
func agentStatus(e liveness.Entry, now time.Time) agentStatusJSON {
	a := agentStatusJSON{Node: e.Node, State: e.State.String(), At: e.At, AgeS: max(now.Sub(e.At), 0).Seconds(), Revision: e.Revision, Jobs: []liveness.HostedJob{}}
	if r := e.Record; r != nil {
		a.Slots, a.Used, a.Version, a.Listen, a.TTLMS = r.Slots, r.Used, r.Version, r.Listen, r.TTLMS
		started := r.Started
		a.Started = &started
		if r.Jobs != nil {
			a.Jobs = r.Jobs
		}
	}
	return a
}

// printStatus prints the clusters as tables.
func printStatus(w io.Writer, s statusJSON) {
	for i, c := range s.Clusters {
		if i > 0 {
			fmt.Fprintln(w)
		}
		up := 0
		for _, a := range c.Agents {
			if a.State == "up" {
				up++
			}
		}
		fmt.Fprintf(w, "cluster %s (JetStream domain %s): %s up", c.Cluster, c.Domain, agents(up))
		if down := len(c.Agents) - up; down > 0 {
			fmt.Fprintf(w, ", %d down", down)
		}
		fmt.Fprintln(w)
		if c.Error != "" {
			fmt.Fprintf(w, "  error: %s\n", c.Error)
		}
		if len(c.Agents) == 0 {
			continue
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  NODE\tSTATE\tSLOTS\tUSED\tLAST BEAT\tVERSION\tLISTEN\tJOBS")
		for _, a := range c.Agents {
			age := (time.Duration(a.AgeS * float64(time.Second))).Round(100 * time.Millisecond).String()
			if a.State != "up" {
				fmt.Fprintf(tw, "  %s\t%s\t-\t-\texpired %s ago\t-\t-\t-\n", a.Node, a.State, age)
				continue
			}
			jobs := make([]string, len(a.Jobs))
			for i, j := range a.Jobs {
				jobs[i] = j.Nspace + ":" + launch.FormatRanks(j.Ranks)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s ago\t%s\t%s\t%s\n", a.Node, a.State, a.Slots, a.Used, age, a.Version, a.Listen, orDash(strings.Join(jobs, " ")))
		}
		_ = tw.Flush()
		printLaunched(w, c.Agents)
	}
}

// printLaunched lists the ranks the agents' launch services run.
func printLaunched(w io.Writer, as []agentStatusJSON) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := false
	for _, a := range as {
		for _, j := range a.Launched {
			for _, r := range j.Ranks {
				if !header {
					fmt.Fprintln(tw, "  JOB\tRANK\tNODE\tPID\tSTATE\tLAUNCHER")
					header = true
				}
				fmt.Fprintf(tw, "  %s\t%d\t%s\t%d\t%s\t%s\n", j.Nspace, r.Rank, a.Node, r.Pid, r.State, orDash(j.Launcher))
			}
		}
	}
	_ = tw.Flush()
}

func agents(n int) string {
	if n == 1 {
		return "1 agent"
	}
	return strconv.Itoa(n) + " agents"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
