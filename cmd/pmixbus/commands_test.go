package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/internal/demo"
	"github.com/pmixbus/pmixbus/pmix"
)

// running is a command run in-process in the background by startCmd.
type running struct {
	name           string
	stdout, stderr *clustertest.Buffer
	stop           context.CancelFunc
	code           chan int
}

// startCmd runs "pmixbus args..." until the test ends (or stop is called),
// and waits until ready holds for it.
func startCmd(t *testing.T, ready func(*running) error, args ...string) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{name: args[0], stdout: &clustertest.Buffer{}, stderr: &clustertest.Buffer{}, stop: cancel, code: make(chan int, 1)}
	go func() { r.code <- run(ctx, args, r.stdout, r.stderr) }()
	t.Cleanup(func() {
		cancel()
		<-r.code
	})
	clustertest.WaitFor(t, 30*time.Second, func() error {
		select {
		case code := <-r.code:
			r.code <- code
			t.Fatalf("pmixbus %s exited with %d:\nstdout: %s\nstderr: %s", r.name, code, r.stdout, r.stderr)
		default:
		}
		return ready(r)
	})
	return r
}

// wait waits for the command to exit, stopping it first if stop is set,
// and returns its exit code.
func (r *running) wait(t *testing.T, stop bool) int {
	t.Helper()
	if stop {
		r.stop()
	}
	select {
	case code := <-r.code:
		r.code <- code // for the cleanup
		return code
	case <-time.After(30 * time.Second):
		t.Fatalf("pmixbus %s did not exit; stdout: %s", r.name, r.stdout)
		return -1
	}
}

// line returns the value of the first stdout line starting with prefix.
func (r *running) line(prefix string) string {
	sc := bufio.NewScanner(strings.NewReader(r.stdout.String()))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v
		}
	}
	return ""
}

func hasLine(prefix string) func(*running) error {
	return func(r *running) error {
		if r.line(prefix) == "" {
			return fmt.Errorf("no %q line yet; stdout: %q", prefix, r.stdout.String())
		}
		return nil
	}
}

// subscribed is ready once watch says it subscribed.
func subscribed(r *running) error {
	if !strings.Contains(r.stderr.String(), "pmixbus watch: subscribed to") {
		return fmt.Errorf("watch not subscribed yet; stderr: %q", r.stderr.String())
	}
	return nil
}

// clientEnvs parses the "# client p" / "export K=V" blocks an agent prints.
func clientEnvs(t *testing.T, out string) map[string]map[string]string {
	t.Helper()
	envs := map[string]map[string]string{}
	var cur map[string]string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "# client "); ok {
			cur = map[string]string{}
			envs[p] = cur
		} else if kv, ok := strings.CutPrefix(l, "export "); ok {
			k, v, _ := strings.Cut(kv, "=")
			cur[k] = strings.Trim(v, "'")
		}
	}
	return envs
}

func TestCommandUsageErrors(t *testing.T) {
	tests := []struct {
		name       string
		env        map[string]string
		args       []string
		wantStderr []string
	}{
		{name: "agent bad flag", args: []string{"agent", "--nope"}, wantStderr: []string{"pmixbus agent: flag provided but not defined: -nope", "pmixbus agent -h"}},
		{name: "agent bad cluster", args: []string{"agent", "--cluster", "a.b"}, wantStderr: []string{"--cluster:", `contains '.'`}},
		{name: "agent bad cluster from env", env: map[string]string{"PMIXBUS_CLUSTER": "a:b"}, args: []string{"agent"}, wantStderr: []string{"--cluster:", `contains ':'`}},
		{name: "agent bad timeout from env", env: map[string]string{"PMIXBUS_HANDLER_TIMEOUT": "soon"}, args: []string{"agent"}, wantStderr: []string{`PMIXBUS_HANDLER_TIMEOUT="soon": invalid value for --handler-timeout`}},
		{name: "agent bad listen", args: []string{"agent", "--listen", "udp:x"}, wantStderr: []string{`listen "udp:x": want unix:/path or tcp:127.0.0.1:port`}},
		{name: "agent port with nats", args: []string{"agent", "--nats", "nats://h:1", "--port", "4222"}, wantStderr: []string{"--port, --store, --nats-host, --leaf-remote and --leaf-tls-* are for the embedded NATS server"}},
		{name: "agent leaf TLS with nats", args: []string{"agent", "--nats", "nats://h:1", "--leaf-tls-ca", "ca.pem"}, wantStderr: []string{"--leaf-tls-* are for the embedded NATS server"}},
		{name: "agent leaf TLS key without cert", args: []string{"agent", "--leaf-tls-key", "k.pem"}, wantStderr: []string{"LeafTLS: Cert and Key go together"}},
		{name: "agent bad leaf remote", args: []string{"agent", "--leaf-remote", "http://h:1"}, wantStderr: []string{"LeafRemotes", `scheme "http"`}},
		{name: "agent bad port", args: []string{"agent", "--port", "0"}, wantStderr: []string{"Port: 0"}},
		{name: "agent bad log level", args: []string{"agent", "--log-level", "loud"}, wantStderr: []string{`--log-level: unknown level "loud"`}},
		{name: "agent job without procs", args: []string{"agent", "--job", "sim"}, wantStderr: []string{`--job: "sim": want nspace:session:rank=node`}},
		{name: "agent job bad rank", args: []string{"agent", "--job", "sim:s:x=n1"}, wantStderr: []string{`rank "x": want a number or lo-hi`}},
		{name: "agent job bad range", args: []string{"agent", "--job", "sim:s:3-1=n1"}, wantStderr: []string{`rank range "3-1"`}},
		{name: "agent job rank twice", args: []string{"agent", "--job", "sim:s:0-1=n1,1=n2"}, wantStderr: []string{"rank 1 is given twice (on n1 and n2)"}},
		{name: "agent job no node", args: []string{"agent", "--job", "sim:s:0"}, wantStderr: []string{`"0" is not rank=node`}},
		{name: "agent client without job", args: []string{"agent", "--client", "sim.0"}, wantStderr: []string{"--client: sim.0: no --job sim"}},
		{name: "agent client elsewhere", args: []string{"agent", "--node", "n1", "--job", "sim::0=n2", "--client", "sim.0"}, wantStderr: []string{"sim.0 runs on node n2 per --job, not on this agent's node n1"}},
		{name: "agent client no rank", args: []string{"agent", "--node", "n1", "--job", "sim:0=n1", "--client", "sim.4"}, wantStderr: []string{"job sim has no rank 4"}},
		{name: "agent client bad proc", args: []string{"agent", "--client", "sim"}, wantStderr: []string{`invalid proc "sim"`}},
		{name: "agent extra argument", args: []string{"agent", "now"}, wantStderr: []string{`unexpected argument "now"`}},

		{name: "notify no code", args: []string{"notify", "--nats", "nats://h:1", "--range", "global"}, wantStderr: []string{"--code: an event code is required"}},
		{name: "notify bad code", args: []string{"notify", "--nats", "nats://h:1", "--code", "EVENT_BOOM", "--range", "global"}, wantStderr: []string{`--code: unknown status "EVENT_BOOM"`}},
		{name: "notify no range", args: []string{"notify", "--nats", "nats://h:1", "--code", "EVENT_NODE_DOWN"}, wantStderr: []string{"--range: a data range is required"}},
		{name: "notify bad range", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "galaxy"}, wantStderr: []string{`--range: unknown range "galaxy"`}},
		{name: "notify proc local", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "proc_local"}, wantStderr: []string{"proc_local events never leave their process"}},
		{name: "notify namespace without nspace", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "namespace"}, wantStderr: []string{"needs --nspace, or --affected procs of one nspace"}},
		{name: "notify session without session", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "session"}, wantStderr: []string{"needs --session"}},
		{name: "notify custom without target", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "custom"}, wantStderr: []string{"needs at least one --target"}},
		{name: "notify target without custom", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "global", "--target", "a.0"}, wantStderr: []string{"--target: only a custom-range event has targets"}},
		{name: "notify bad target", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "custom", "--target", "a"}, wantStderr: []string{`--target: invalid proc "a"`}},
		{name: "notify bad affected", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "global", "--affected", "a.x"}, wantStderr: []string{`--affected: invalid proc "a.x"`}},
		{name: "notify info without value", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "global", "--info", "k"}, wantStderr: []string{`--info: info "k": want key=value or key:type=value`}},
		{name: "notify info bad type", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "global", "--info", "k:complex=1"}, wantStderr: []string{`unknown type "complex"`}},
		{name: "notify info bad int", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "global", "--info", "k:uint32=-1"}, wantStderr: []string{`uint32 value "-1": want an unsigned 32-bit number`}},
		{name: "notify info bad bool", args: []string{"notify", "--nats", "nats://h:1", "--code", "-201", "--range", "global", "--info", "k:bool=yes please"}, wantStderr: []string{`bool value "yes please"`}},
		{name: "notify bad cluster", args: []string{"notify", "--nats", "nats://h:1", "--cluster", "", "--code", "-201", "--range", "global"}, wantStderr: []string{"--cluster:", "empty"}},

		{name: "watch bad range", args: []string{"watch", "--nats", "nats://h:1", "--range", "galaxy"}, wantStderr: []string{`--range: unknown range "galaxy"`}},
		{name: "watch negative count", args: []string{"watch", "--nats", "nats://h:1", "--count", "-1"}, wantStderr: []string{"--count: -1 is negative"}},
		{name: "watch bad cluster", args: []string{"watch", "--nats", "nats://h:1", "--cluster", "a b"}, wantStderr: []string{"--cluster:"}},

		{name: "bench nothing", args: []string{"bench"}, wantStderr: []string{"pmixbus bench: no benchmark given; want one of", "events"}},
		{name: "bench unknown", args: []string{"bench", "frob"}, wantStderr: []string{`unknown benchmark "frob"`}},
		{name: "bench events bad flag", args: []string{"bench", "events", "--rounds", "3"}, wantStderr: []string{"pmixbus bench events: flag provided but not defined: -rounds", "pmixbus bench events -h"}},
		{name: "bench events one client", args: []string{"bench", "events", "--clients", "1"}, wantStderr: []string{"--clients: 1; want at least 2"}},
		{name: "bench events no agents", args: []string{"bench", "events", "--agents", "0"}, wantStderr: []string{"--agents: 0; want at least 1"}},

		{name: "demo extra argument", args: []string{"demo", "now"}, wantStderr: []string{`pmixbus demo: unexpected argument "now"`}},
		{name: "demo bad log level", args: []string{"demo", "--log-level", "loud"}, wantStderr: []string{`--log-level: unknown level "loud"`}},
		{name: "demo bad timeout", args: []string{"demo", "--timeout", "0s"}, wantStderr: []string{"--timeout: 0s"}},
		{name: "demo-client without role", env: map[string]string{demo.RoleEnv: ""}, args: []string{"demo-client"}, wantStderr: []string{demo.RoleEnv + `="": not a demo role`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, exitUsage, stdout, stderr)
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if stdout != "" {
				t.Errorf("stdout not empty on a usage error: %s", stdout)
			}
		})
	}
}

func TestHelpOfNewCommands(t *testing.T) {
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"agent", "-h"}, []string{"Usage: pmixbus agent", "PMIXBUS_CLUSTER", "--job nspace:session:rank=node", "export", "-handler-timeout"}},
		{[]string{"notify", "--help"}, []string{"Usage: pmixbus notify", "key:type=value", "-non-default", "-no-cache", "-target"}},
		{[]string{"watch", "-h"}, []string{"Usage: pmixbus watch", "-outcomes", "-json", "-count"}},
		{[]string{"status", "-h"}, []string{"Usage: pmixbus status", "PMIXBUS_AGENTS", "-json", "-cluster", "-wait"}},
		{[]string{"agent", "-h"}, []string{"-slots", "-liveness-ttl", "-liveness-interval", "PMIXBUS_LIVENESS_TTL"}},
		{[]string{"bench", "--help"}, []string{"Usage: pmixbus bench <benchmark>", "Benchmarks:", "events ", "target <name>"}},
		{[]string{"bench", "events", "-h"}, []string{"Usage: pmixbus bench events", "-latency-rounds", "-fanout-events"}},
		{[]string{"help", "demo"}, []string{"Usage: pmixbus demo", "east", "west"}},
		{[]string{"-h"}, []string{"agent ", "bench ", "demo ", "notify ", "watch "}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != 0 || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("usage lacks %q:\n%s", w, stdout)
				}
			}
			if tt.args[0] == "-h" && strings.Contains(stdout, "demo-client") {
				t.Errorf("the top-level usage lists the hidden demo-client:\n%s", stdout)
			}
		})
	}
}

func TestParseInfo(t *testing.T) {
	tests := []struct {
		in   string
		want pmix.Info
	}{
		{"pmix.evtext=a=b", pmix.NewInfo("pmix.evtext", pmix.String("a=b"))},
		{"k=", pmix.NewInfo("k", pmix.String(""))},
		{"k:int=-5", pmix.NewInfo("k", pmix.Int64(-5))},
		{"k:int32=7", pmix.NewInfo("k", pmix.Int32(7))},
		{"k:bool=true", pmix.NewInfo("k", pmix.Bool(true))},
		{"k:uint8=255", pmix.NewInfo("k", pmix.Uint8(255))},
		{"k:uint32=4000000000", pmix.NewInfo("k", pmix.Uint32(4000000000))},
		{"k:uint64=18446744073709551615", pmix.NewInfo("k", pmix.Uint64(18446744073709551615))},
		{"k:float=0.25", pmix.NewInfo("k", pmix.Float64(0.25))},
		{"k:status=EVENT_NODE_DOWN", pmix.NewInfo("k", pmix.StatusValue(pmix.EventNodeDown))},
		{"k:range=session", pmix.NewInfo("k", pmix.RangeValue(pmix.RangeSession))},
		{"k:rank=*", pmix.NewInfo("k", pmix.RankValue(pmix.RankWildcard))},
		{"k:proc=A:job.1.3", pmix.NewInfo("k", pmix.ProcValue(pmix.Proc{Nspace: "A:job.1", Rank: 3}))},
		{"k:procs=a.0,b.*", pmix.NewInfo("k", pmix.Procs([]pmix.Proc{{Nspace: "a", Rank: 0}, {Nspace: "b", Rank: pmix.RankWildcard}}))},
	}
	for _, tt := range tests {
		got, err := parseInfo(tt.in)
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseInfo(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"novalue", "=v", ":int=1", "k:int=x", "k:uint8=256", "k:float=inf", "k:proc=nope", "k:what=1"} {
		if _, err := parseInfo(bad); err == nil {
			t.Errorf("parseInfo(%q) succeeded", bad)
		}
	}
}

// TestNotifyAndWatch sends events with notify and sees them with watch, as
// JSON and as lines.
func TestNotifyAndWatch(t *testing.T) {
	srv := clustertest.StartServer(t, "A")
	url := srv.ClientURL()

	w := startCmd(t, subscribed, "watch", "--nats", url, "--count", "1", "--json")
	code, stdout, stderr := runCmd(t, "notify", "--nats", url, "--cluster", "A", "--node", "n1",
		"--code", "EVENT_PROC_TERMINATED", "--range", "namespace", "--nspace", "job1", "--affected", "job1.3",
		"--non-default", "--info", "pmix.evtext=rank 3 died", "--info", "n:uint32=7", "--info", "p:proc=job1.3")
	if code != 0 || !strings.Contains(stdout, "to pmix.evt.A.ns.job1.-201") {
		t.Fatalf("notify: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if code := w.wait(t, false); code != 0 {
		t.Fatalf("watch exit %d: %s", code, w.stderr)
	}
	var ev eventJSON
	if err := json.Unmarshal([]byte(w.stdout.String()), &ev); err != nil {
		t.Fatalf("watch printed %q: %v", w.stdout, err)
	}
	if ev.Kind != "event" || ev.Subject != "pmix.evt.A.ns.job1.-201" || ev.Code != -201 || ev.CodeName != "PMIX_EVENT_PROC_TERMINATED" ||
		ev.Range != "PMIX_RANGE_NAMESPACE" || ev.Environment || ev.Source != (sourceJSON{Cluster: "A", Node: "n1"}) || !strings.HasPrefix(ev.ID, "notify.") {
		t.Errorf("event %+v", ev)
	}
	infos := map[string]infoJSON{}
	for _, in := range ev.Info {
		infos[in.Key] = in
	}
	for key, want := range map[string]infoJSON{
		"pmix.evtext":   {Key: "pmix.evtext", Type: "string", Value: "rank 3 died"},
		"n":             {Key: "n", Type: "uint32", Value: float64(7)},
		"p":             {Key: "p", Type: "proc", Value: "job1.3"},
		"pmix.nspace":   {Key: "pmix.nspace", Type: "string", Value: "job1"},
		"pmix.evproc":   {Key: "pmix.evproc", Type: "proc", Value: "job1.3"},
		"pmix.evnondef": {Key: "pmix.evnondef", Type: "bool", Value: true},
	} {
		if infos[key] != want {
			t.Errorf("info %s = %+v, want %+v", key, infos[key], want)
		}
	}

	// Lines, narrowed to custom events of cluster B: the environment event
	// and the events of A are not printed.
	w = startCmd(t, subscribed, "watch", "--nats", url, "--count", "1", "--cluster", "B", "--range", "custom")
	for _, args := range [][]string{
		{"--cluster", "B", "--code", "EVENT_NODE_DOWN", "--env", "--no-cache"},
		{"--cluster", "A", "--code", "-3001", "--range", "custom", "--target", "job1.0"},
		{"--cluster", "A", "--code", "-3002", "--range", "custom", "--target", "job1.0", "--target", "B:jobB.*"},
	} {
		if code, stdout, stderr := runCmd(t, append([]string{"notify", "--nats", url, "--node", "n1"}, args...)...); code != 0 {
			t.Fatalf("notify %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
		}
	}
	if code := w.wait(t, false); code != 0 {
		t.Fatalf("watch exit %d: %s", code, w.stderr)
	}
	want := "pmix.evt.B.ns.jobB.-3002 code -3002 CUSTOM from A/n1 RM to job1.0,B:jobB.* info: pmix.evrange=[job1.0 B:jobB.*]"
	if got := w.stdout.String(); !strings.Contains(got, want) || strings.Count(got, "\n") != 1 {
		t.Errorf("watch printed:\n%s\nwant one line with %q", got, want)
	}
}

// TestAgentCommand runs an agent against a NATS server with the flags and
// variables a host would use, attaches the client it registered, and sees
// a notify reach its handler and the outcome reach watch.
func TestAgentCommand(t *testing.T) {
	clustertest.CheckGoroutines(t)
	srv := clustertest.StartServer(t, "A")
	url := srv.ClientURL()
	t.Setenv("PMIXBUS_CLUSTER", "A")
	t.Setenv("PMIXBUS_NODE", "from-env")
	t.Setenv("PMIXBUS_NATS", url)
	a := startCmd(t, hasLine("NATS URL: "), "agent", "--node", "n1", "--listen", "tcp:127.0.0.1:0",
		"--log-level", "off", "--handler-timeout", "5s", "--job", "sim:s1:0-1=n1,2=n2", "--client", "sim.1")
	if got := a.line("pmixbus agent "); got != "n1 of cluster A ready" {
		t.Errorf("ready line %q", got)
	}
	if got := a.line("listen: "); !strings.HasPrefix(got, "tcp:127.0.0.1:") || strings.HasSuffix(got, ":0") {
		t.Errorf("listen %q", got)
	}
	if got := a.line("NATS URL: "); got != url {
		t.Errorf("NATS URL %q, want %q", got, url)
	}
	env := clientEnvs(t, a.stdout.String())["sim.1"]
	if env["PMIX_NAMESPACE"] != "sim" || env["PMIX_RANK"] != "1" || env["PMIXBUS_AGENT"] != a.line("listen: ") || len(env["PMIXBUS_CREDENTIAL"]) < 32 {
		t.Fatalf("client environment %v from:\n%s", env, a.stdout)
	}

	c, err := client.Init(t.Context(), client.WithEnv(env))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Finalize(context.Background())
	ran := make(chan *bus.Call, 1)
	if _, err := c.RegisterEventHandler(t.Context(), []pmix.Status{pmix.EventNodeDown}, []pmix.Info{pmix.NewInfo(pmix.KeyEventHdlrName, pmix.String("h"))},
		func(call *bus.Call, done bus.Done) {
			ran <- call
			done(pmix.EventActionComplete, nil)
		}); err != nil {
		t.Fatal(err)
	}
	w := startCmd(t, subscribed, "watch", "--cluster", "A", "--outcomes", "--count", "2", "--json")
	lines := startCmd(t, subscribed, "watch", "--outcomes", "--count", "2")
	if code, stdout, stderr := runCmd(t, "notify", "--code", "EVENT_NODE_DOWN", "--range", "session", "--session", "s1"); code != 0 {
		t.Fatalf("notify: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	select {
	case call := <-ran:
		if call.Name != "h" || !call.Source.IsZero() {
			t.Errorf("handler saw %+v", call)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the handler never ran")
	}
	if code := w.wait(t, false); code != 0 {
		t.Fatalf("watch exit %d: %s", code, w.stderr)
	}
	var out outcomeJSON
	for _, l := range strings.Split(strings.TrimSpace(w.stdout.String()), "\n") {
		if strings.Contains(l, `"kind":"outcome"`) {
			if err := json.Unmarshal([]byte(l), &out); err != nil {
				t.Fatal(err)
			}
		}
	}
	if out.Client != "sim.1" || out.Node != "n1" || out.Cluster != "A" || !out.Completed || len(out.Ran) != 1 || out.Ran[0] != (ranJSON{Name: "h", Status: "PMIX_EVENT_ACTION_COMPLETE"}) {
		t.Errorf("outcome %+v\nfrom:\n%s", out, w.stdout)
	}

	if code := lines.wait(t, false); code != 0 {
		t.Fatalf("watch exit %d: %s", code, lines.stderr)
	}
	for _, want := range []string{
		" pmix.evt.A.sess.s1.-231 PMIX_EVENT_NODE_DOWN(-231) SESSION from A/from-env RM info: pmix.session.id=\"s1\"\n",
		" pmix.outcome.A.n1 outcome PMIX_EVENT_NODE_DOWN(-231) A/n1 sim.1 from RM: h:COMPLETE => completed\n",
	} {
		if !strings.Contains(lines.stdout.String(), want) {
			t.Errorf("watch lacks %q:\n%s", want, lines.stdout)
		}
	}

	if code := a.wait(t, true); code != 0 {
		t.Fatalf("agent exit %d: %s", code, a.stderr)
	}
	select {
	case <-c.Lost():
	case <-time.After(10 * time.Second):
		t.Fatal("the client did not see the agent go")
	}
}

// TestAgentCommandEmbedded runs an agent with its own NATS server on a
// Unix socket, the defaults a single node uses.
func TestAgentCommandEmbedded(t *testing.T) {
	dir := agenttest.SocketDir(t)
	a := startCmd(t, hasLine("NATS URL: "), "agent", "--cluster", "solo", "--node", "n1", "--port", "-1", "--store", t.TempDir(),
		"--listen", "unix:"+dir+"/a.sock", "--log-level", "warn", "--job", "j::0=n1", "--client", "j.0")
	if got := a.line("NATS URL: "); !strings.HasPrefix(got, "nats://127.0.0.1:") {
		t.Errorf("NATS URL %q", got)
	}
	c, err := client.Init(t.Context(), client.WithEnv(clientEnvs(t, a.stdout.String())["j.0"]))
	if err != nil {
		t.Fatal(err)
	}
	if c.Cluster() != "solo" {
		t.Errorf("client cluster %q", c.Cluster())
	}
	if err := c.Finalize(t.Context()); err != nil {
		t.Fatal(err)
	}
	if code := a.wait(t, true); code != 0 || a.stderr.String() != "" {
		t.Fatalf("agent exit %d: %s", code, a.stderr)
	}
}

// --metrics-addr serves the agent's and its embedded server's metrics.
func TestAgentCommandMetrics(t *testing.T) {
	dir := agenttest.SocketDir(t)
	a := startCmd(t, hasLine("metrics URL: "), "agent", "--cluster", "solo", "--node", "n1", "--port", "-1", "--store", t.TempDir(),
		"--listen", "unix:"+dir+"/a.sock", "--log-level", "warn", "--metrics-addr", "127.0.0.1:0")
	resp, err := http.Get(a.line("metrics URL: "))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`pmixbus_agent_nats_connected{cluster="solo",node="n1"} 1`, `pmixbus_nats_connections{cluster="solo"`} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %q:\n%s", want, body)
		}
	}
	if code := a.wait(t, true); code != 0 || a.stderr.String() != "" {
		t.Fatalf("agent exit %d: %s", code, a.stderr)
	}
}

func TestBenchEvents(t *testing.T) {
	code, stdout, stderr := runCmd(t, "bench", "events", "--latency-rounds", "20", "--fanout-events", "10", "--agents", "2", "--clients", "4")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range []string{"events: 2 agents, 4 clients", "\ntarget notify_p50_vs_nats_rtt ", "\ntarget fanout_vs_nats "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
}
