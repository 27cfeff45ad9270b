package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/security"
)

// TestRunCommand: "pmixbus run" with the launcher key of the keys
// directory launches plain programs (no PMIx) through two clusters'
// agents, forwards their output and exits with the job's status.
func TestRunCommand(t *testing.T) {
	keyDir := t.TempDir()
	w := startWithKeys(t, keyDir, agenttest.Spec{
		Clusters: []agenttest.Cluster{{ID: "A", Nodes: []string{"a1", "a2"}}, {ID: "B", Nodes: []string{"b1"}}},
		Agent: func(c *agent.Config) {
			c.Slots = 2
			c.KillGrace = 500 * time.Millisecond
		},
	})
	key := security.KeyFile(keyDir, security.RoleLauncher)
	url := w.URL("A")
	for _, tt := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"hello", []string{"-n", "4", "/bin/sh", "-c", "echo hello from $PMIX_RANK"}, 0, []string{"hello from 0\n", "hello from 3\n"}, nil},
		{"env and wdir", []string{"-n", "1", "--env", "GREETING=hi", "--wdir", "/tmp", "/bin/sh", "-c", "echo $GREETING in $(pwd)"}, 0, []string{"hi in /tmp\n"}, nil},
		{"exit status", []string{"-n", "3", "/bin/sh", "-c", `if [ "$PMIX_RANK" = 2 ]; then exit 5; fi; sleep 30`}, 5, nil,
			[]string{"rank 2 of", "exited with status 5", "PMIX_ERR_EXIT_NONZERO_TERM", "the other ranks were ended"}},
		{"mpmd", []string{"-n", "2", "/bin/echo", "east", ":", "-n", "1", "--cluster", "B", "/bin/echo", "west"}, 0, []string{"east\n", "west\n"}, nil},
		{"mpmd failure", []string{"-n", "2", "/bin/sleep", "30", ":", "-n", "1", "--cluster", "B", "/bin/sh", "-c", "exit 4"}, 4, nil,
			[]string{"rank 2 (app 1) of", "on node B:b1 exited with status 4", "the other ranks were ended"}},
		{"too many", []string{"-n", "5", "/bin/true"}, 1, nil, []string{"5 ranks, 4 free slots", "--oversubscribe"}},
		{"unknown host", []string{"-n", "1", "--host", "zz", "/bin/true"}, 1, nil, []string{`unknown host "zz"`, "a1, a2"}},
		{"missing program", []string{"-n", "2", "/no/such/prog"}, 1, nil, []string{"/no/such/prog", "node a1"}},
		{"timeout", []string{"-n", "1", "--timeout", "500ms", "/bin/sleep", "30"}, 124, nil, []string{"ran out of time"}},
		{"no program", []string{"-n", "1"}, 2, nil, []string{"no program given"}},
		{"tagged", []string{"--output", "tag", "--nspace", "tagged", "-n", "2", "/bin/sh", "-c", "echo hi; echo err >&2"}, 0, []string{"[tagged,0]<stdout>: hi\n", "[tagged,1]<stdout>: hi\n"}, []string{"[tagged,1]<stderr>: err\n"}},
		{"xml", []string{"--output", "xml", "--nspace", "x@7", "-n", "1", "/bin/echo", "a<b"}, 0, []string{`<stdout rank="0">a&lt;b&#010;</stdout>`}, nil},
		{"bad output", []string{"--output", "tag,xm,jso", "-n", "1", "/bin/true"}, 2, nil, []string{"--output"}},
		{"unknown directive", []string{"--output", "bogus", "-n", "1", "/bin/true"}, 2, nil, []string{`pmixbus run: --output: unknown directive "bogus"; valid: tag,`}},
		// mpirun's and prterun's names.
		{"np", []string{"-np", "2", "/bin/sh", "-c", "echo np $PMIX_RANK"}, 0, []string{"np 0\n", "np 1\n"}, nil},
		{"gnu np", []string{"--np=2", "/bin/sh", "-c", "echo gnu $PMIX_RANK"}, 0, []string{"gnu 0\n", "gnu 1\n"}, nil},
		{"x", []string{"-x", "FOO=bar", "-x", "HOME", "-n", "1", "/bin/sh", "-c", `echo "$FOO $HOME"`}, 0, []string{"bar " + os.Getenv("HOME") + "\n"}, nil},
		{"tag-output", []string{"--tag-output", "--nspace", "tagout", "-n", "1", "/bin/echo", "hi"}, 0, []string{"[tagout,0]<stdout>: hi\n"}, nil},
		{"timestamp-output", []string{"--timestamp-output", "-n", "1", "/bin/echo", "hi"}, 0, []string{"]<stdout>: hi\n"}, nil},
		{"H and map-by", []string{"-H", "a2:1,a2", "--map-by", "core:NOOVERSUBSCRIBE", "--tag-output", "--nspace", "hmap", "-n", "2", "/bin/sh", "-c", "echo $OMPI_COMM_WORLD_LOCAL_SIZE"}, 0, []string{"[hmap,1]<stdout>: 2\n"}, nil},
		{"map-by oversubscribe", []string{"-H", "a1:1", "--map-by", "slot:OVERSUBSCRIBE", "-n", "2", "/bin/true"}, 0, nil, nil},
		{"map-by unknown", []string{"--map-by", "ppr:2:node", "-n", "1", "/bin/true"}, 2, nil, []string{"--map-by ppr: unknown policy"}},
		{"allow-run-as-root", []string{"--allow-run-as-root", "-n", "1", "/bin/true"}, 0, nil, nil},
		{"version", []string{"--version"}, 0, []string{"pmixbus run (pmixbus) "}, nil},
		{"nspace twice", []string{"--nspace", "tagged", "-n", "1", "/bin/true"}, 1, nil, []string{"keeps the output of an earlier run", "another --nspace"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"run", "--nats", url, "--nkey", key}, tt.args...)
			code, out, errOut := runCmd(t, args...)
			if code != tt.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, tt.code, out, errOut)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("stdout lacks %q:\n%s", s, out)
				}
			}
			if tt.name == "mpmd" && (strings.Count(out, "east\n") != 2 || strings.Count(out, "west\n") != 1) {
				t.Errorf("mpmd output:\n%s", out)
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("stderr lacks %q:\n%s", s, errOut)
				}
			}
		})
	}
	// A rank's background child ends with it and does not hold the job
	// (its group is killed when it exits); nothing of the job stays on
	// the agents.
	code, out, errOut := runCmd(t, "run", "--nats", url, "--nkey", key, "--nspace", "bg", "-n", "2", "/bin/sh", "-c", "sleep 300 & echo $!")
	if code != 0 {
		t.Fatalf("background child: exit %d\n%s%s", code, out, errOut)
	}
	for _, f := range strings.Fields(out) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("output %q", out)
		}
		clustertest.WaitFor(t, 10*time.Second, func() error {
			if clustertest.ProcessRuns(pid) {
				return fmt.Errorf("the background child %d outlived its rank", pid)
			}
			return nil
		})
	}
	clustertest.WaitFor(t, 10*time.Second, func() error {
		if code, out, _ := runCmd(t, "status", "--nats", url, "--nkey", security.KeyFile(keyDir, security.RoleWatch), "--cluster", "A"); code != 0 || strings.Contains(out, "bg:") {
			return fmt.Errorf("the agents still hold the job: exit %d\n%s", code, out)
		}
		return nil
	})
	// A hostfile, as Open MPI's; --host picks among its hosts.
	hostfile := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hostfile, []byte("# two nodes\na1 slots=1\na2   # as many as its agent has\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, out, errOut = runCmd(t, "run", "--nats", url, "--nkey", key, "--hostfile", hostfile, "--tag-output", "--nspace", "hf", "-n", "3", "/bin/sh", "-c", "echo $OMPI_COMM_WORLD_LOCAL_SIZE")
	if code != 0 || !strings.Contains(out, "[hf,0]<stdout>: 1\n") || !strings.Contains(out, "[hf,2]<stdout>: 2\n") {
		t.Fatalf("hostfile: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := runCmd(t, "run", "--nats", url, "--nkey", key, "--hostfile", hostfile, "-H", "b1", "-n", "1", "/bin/true"); code != exitUsage || !strings.Contains(errOut, "--host b1 is not in --hostfile") {
		t.Fatalf("host outside the hostfile: exit %d: %s", code, errOut)
	}
	// --xml is one well-formed document on stdout, the text as written.
	code, out, errOut = runCmd(t, "run", "--nats", url, "--nkey", key, "--xml", "-n", "2", "/bin/sh", "-c", `printf 'caf\303\251 \342\202\254 \001<\n'; echo err >&2`)
	if code != 0 || errOut != "" {
		t.Fatalf("xml: exit %d\n%s%s", code, out, errOut)
	}
	root, text, err := iof.ReadXML(strings.NewReader(out))
	if err != nil || root != "mpirun" || strings.Count(string(text), "café € \x01<\n") != 2 || strings.Count(string(text), "err\n") != 2 {
		t.Fatalf("xml: root %q, text %q, %v\n%s", root, text, err, out)
	}
	// A key that may not launch fails at once, saying why.
	code, _, errOut = runCmd(t, "run", "--nats", url, "--nkey", security.KeyFile(keyDir, security.RoleWatch), "-n", "1", "/bin/true")
	if code != exitFail || !strings.Contains(errOut, "may not launch jobs") || !strings.Contains(errOut, "launcher.nk") {
		t.Fatalf("watch key: exit %d: %s", code, errOut)
	}
	// The rm key may not launch: the servers refuse a job credential it
	// vouches for.
	code, _, errOut = runCmd(t, "run", "--nats", url, "--nkey", security.KeyFile(keyDir, security.RoleRM), "-n", "1", "/bin/true")
	if code != exitFail || !strings.Contains(errOut, "may not launch jobs") {
		t.Fatalf("rm key: exit %d: %s", code, errOut)
	}
}
