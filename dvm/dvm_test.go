package dvm

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

func TestLaunchArgv(t *testing.T) {
	args := []string{"/opt/pmixbus", "agent", "--node", "n 1", "--x", "it's"}
	for _, tt := range []struct {
		template string
		want     []string
	}{
		{"ip netns exec ns-{host}", []string{"ip", "netns", "exec", "ns-n 1", "/opt/pmixbus", "agent", "--node", "n 1", "--x", "it's"}},
		// ssh hands the remote shell one string: quoted.
		{"ssh -o BatchMode=yes {host}", []string{"ssh", "-o", "BatchMode=yes", "n 1", `/opt/pmixbus agent --node 'n 1' --x 'it'\''s'`}},
		{"srun --nodelist={host} --", []string{"srun", "--nodelist=n 1", "--", "/opt/pmixbus", "agent", "--node", "n 1", "--x", "it's"}},
	} {
		if got := launchArgv(tt.template, "n 1", args); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.template, got, tt.want)
		}
	}
}

func TestDefaultLaunchAgent(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "")
	if !strings.HasPrefix(DefaultLaunchAgent(), "ssh ") {
		t.Errorf("outside Slurm: %s", DefaultLaunchAgent())
	}
	t.Setenv("SLURM_JOB_ID", "42")
	if !strings.HasPrefix(DefaultLaunchAgent(), "srun ") {
		t.Errorf("inside Slurm: %s", DefaultLaunchAgent())
	}
}

func TestStartErrors(t *testing.T) {
	connect := func(string) (*nats.Conn, error) { return nil, errors.New("unused") }
	hosts := []launch.Node{{Name: "h1"}}
	for _, cfg := range []Config{
		{Cluster: "A", Connect: connect},
		{Hosts: hosts, Cluster: "A"},
		{Hosts: hosts, Cluster: "a:b", Connect: connect},
		{Hosts: hosts, Cluster: "A", Connect: connect, LaunchAgent: "ssh somewhere"},
	} {
		if _, err := Start(context.Background(), cfg); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
	// An agent that cannot start says why, naming its host.
	_, err := Start(context.Background(), Config{Hosts: hosts, Cluster: "A", Connect: connect, LaunchAgent: "env H={host}", Program: "/no/such/pmixbus"})
	if !errors.Is(err, ErrAgentStart) || !strings.Contains(err.Error(), "h1") || !strings.Contains(err.Error(), "/no/such/pmixbus") {
		t.Fatalf("missing program: %v", err)
	}
}
