package main

import (
	"strings"
	"testing"
	"time"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/agent/agenttest"
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
	// The rm key may not launch.
	code, _, errOut := runCmd(t, "run", "--nats", url, "--nkey", security.KeyFile(keyDir, security.RoleRM), "-n", "1", "/bin/true")
	if code != exitFail || !strings.Contains(errOut, "PMIX_ERR_NO_PERMISSIONS") && !strings.Contains(errOut, "Permissions Violation") {
		t.Fatalf("rm key: exit %d: %s", code, errOut)
	}
}
