package jobs

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/internal/e2e"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// helpSpec: two clusters of two agents, four slots each: 8 ranks a
// cluster.
var helpSpec = agenttest.Spec{
	Clusters: []agenttest.Cluster{
		{ID: "A", Nodes: []string{"a1", "a2"}},
		{ID: "B", Nodes: []string{"b1", "b2"}},
	},
	Agent: func(c *agent.Config) {
		c.Slots = 4
		c.KillGrace = time.Second
	},
}

// TestHelpAggregatedAcrossClusters: 16 ranks in two clusters, one run,
// send the same help message: the launcher shows it once and counts the
// other 15 in OpenPMIx's words; with --no-aggregate-help (All) it shows
// all 16.
func TestHelpAggregatedAcrossClusters(t *testing.T) {
	w := agenttest.Start(t, helpSpec)
	p := e2e.Prog(t)
	nc := e2e.LauncherConn(t, w, "A")
	const file, topic = "help-pmixbus-test.txt", "no-such-thing"
	text := fmt.Sprintf("testprog: help message %s of %s\n", topic, file)
	args := []string{"-help", file + "/" + topic}
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all=%v", all), func(t *testing.T) {
			help := &e2e.SyncBuffer{}
			// An interval longer than the run: the count comes at the
			// job's end, whatever the machine's speed.
			agg := iof.NewAggregator(iof.HelpConfig{Out: help, Interval: time.Hour, All: all})
			res, out := e2e.RunJob(t, launch.Config{Conn: nc, SignIn: w.SignIn(nc.ConnectedUrl()), Help: agg, Jobs: []launch.JobSpec{
				{N: 8, Cluster: "A", App: launch.App{Path: p, Args: args}},
				{N: 8, Cluster: "B", App: launch.App{Path: p, Args: args}},
			}})
			if res.ExitCode != 0 {
				t.Fatalf("result %+v\n%s", res, out)
			}
			if strings.Contains(out.String(), text) {
				t.Errorf("a help message reached stderr, not the aggregator:\n%s", out)
			}
			want := text + iof.HelpCount(15, file, topic) + iof.HelpHint
			if all {
				want = strings.Repeat(text, 16)
			}
			if help.String() != want {
				t.Errorf("help output:\n%s\nwant:\n%s", help, want)
			}
		})
	}
	checkNoOrphans(t, p)
}

// TestLogBadInput: each is refused with its status and a message naming
// what was wrong; nothing is shown.
func TestLogBadInput(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "job", Nodes: []string{"n1"}}},
	})
	c := w.Client("A:job.0")
	stderr := func(s string) []pmix.Info { return []pmix.Info{pmix.NewInfo(pmix.KeyLogStderr, pmix.String(s))} }
	for _, tt := range []struct {
		name             string
		data, directives []pmix.Info
		want             pmix.Status
		text             string
	}{
		{"oversize", stderr(strings.Repeat("x", proto.MaxLogText+1)), nil, pmix.ErrBadParam, "at most 65536"},
		{"oversize in two", append(stderr(strings.Repeat("x", proto.MaxLogText)), stderr("y")...), nil, pmix.ErrBadParam, "at most 65536"},
		{"unknown required directive", stderr("hi\n"), []pmix.Info{pmix.Required(pmix.NewInfo("x.unknown", pmix.Bool(true)))}, pmix.ErrNotSupported, `"x.unknown"`},
		{"unknown channel", []pmix.Info{pmix.NewInfo("pmix.log.email", pmix.String("hi"))}, nil, pmix.ErrNotSupported, `"pmix.log.email"`},
		{"no data", nil, nil, pmix.ErrBadParam, "no data"},
		{"empty", stderr(""), nil, pmix.ErrBadParam, "empty"},
		{"not a string", []pmix.Info{pmix.NewInfo(pmix.KeyLogStderr, pmix.Int32(3))}, nil, pmix.ErrBadParam, "not a string"},
		{"agg not a bool", stderr("hi\n"), []pmix.Info{pmix.NewInfo(pmix.KeyLogAgg, pmix.String("yes"))}, pmix.ErrBadParam, "wrong type"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Log(t.Context(), tt.data, tt.directives)
			if pmix.StatusOf(err) != tt.want || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("Log: %v, want %v mentioning %s", err, tt.want, tt.text)
			}
		})
	}
	if err := c.ShowHelp(t.Context(), "", "topic", "text"); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("ShowHelp without a file: %v", err)
	}
}

// TestLogOfHostClient: a client the agent did not launch (registered by
// a host RM) logs into a diag-only capture: its records are in the
// stream, help headers and all, and its deregistration ends the diag
// channel without claiming its stdout or stderr ended.
func TestLogOfHostClient(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "rmjob", Nodes: []string{"n1"}}},
	})
	c := w.Client("A:rmjob.0")
	if err := c.ShowHelp(t.Context(), "help-x.txt", "topic", "help!\n"); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	c.LogCB([]pmix.Info{pmix.NewInfo(pmix.KeyLogStdout, pmix.String("plain\n"))}, nil, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	recs := make(chan iof.Delivered, 16)
	f, err := iof.Follow(t.Context(), e2e.LauncherConn(t, w, "A"), "A", "rmjob", iof.FollowOptions{MustExist: true, Bad: func(err error) { t.Error(err) }}, func(d iof.Delivered) { recs <- d })
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	if err := w.Agent("n1").DeregisterClient(t.Context(), pmix.Proc{Nspace: "rmjob", Rank: 0}); err != nil {
		t.Fatal(err)
	}
	var got []iof.Parsed
	ctx, cancel := context.WithTimeout(t.Context(), e2e.WaitTime)
	defer cancel()
	for len(got) < 3 {
		select {
		case d := <-recs:
			got = append(got, d.Parsed)
		case <-ctx.Done():
			t.Fatalf("records so far: %+v", got)
		}
	}
	if got[0].Channel != iof.STDDIAG || string(got[0].Data) != "help!\n" || got[0].Help == nil || *got[0].Help != (iof.Help{File: "help-x.txt", Topic: "topic"}) ||
		got[1].Channel != iof.STDDIAG || string(got[1].Data) != "plain\n" || got[1].Help != nil ||
		got[2].Channel != iof.STDDIAG || !got[2].Complete {
		t.Fatalf("records %+v", got)
	}
}

// TestLogFromHandler: Log waits only for the agent, so a handler the
// agent invokes may call it (the C library allows PMIx_Log there).
func TestLogFromHandler(t *testing.T) {
	w := agenttest.Start(t, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A"}},
		Jobs:     []agenttest.Job{{Cluster: "A", Nspace: "job", Nodes: []string{"n1", "n1"}}},
	})
	logged := make(chan error, 1)
	const code = pmix.Status(-3100)
	_, err := w.Client("A:job.1").RegisterEventHandler(t.Context(), []pmix.Status{code}, nil, func(call *bus.Call, done bus.Done) {
		logged <- w.Client("A:job.1").ShowHelp(t.Context(), "help-x.txt", "in-handler", "from a handler\n")
		done(pmix.EventActionComplete, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Client("A:job.0").NotifyEvent(t.Context(), code, pmix.RangeNamespace, nil); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-logged:
		if err != nil {
			t.Fatalf("ShowHelp in a handler: %v", err)
		}
	case <-time.After(e2e.WaitTime):
		t.Fatal("the handler did not log")
	}
}
