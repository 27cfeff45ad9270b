package agent_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/agent"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/security"
)

// TestAgentKeys: an agent with keys secures its embedded server and signs
// in to it; it signs in to a secured server it is given, connects without
// its key to one without authentication, and is refused by a secured one
// without a key. Keys that lack what it needs are a config error.
func TestAgentKeys(t *testing.T) {
	keys, err := security.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	listen := func() string { return "unix:" + filepath.Join(sockDir(t), "a.sock") }

	t.Run("embedded", func(t *testing.T) {
		a := newAgent(t, "", listen(), func(c *agent.Config) {
			c.StoreDir = t.TempDir()
			c.Keys = keys
		})
		if err := a.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer shutdown(t, a)
		clustertest.Refused(t, a.Server().ClientURL())
		if !a.NATS().IsConnected() {
			t.Fatal("the agent is not connected")
		}
	})

	t.Run("open server", func(t *testing.T) {
		srv := clustertest.StartServer(t, "A")
		a := newAgent(t, srv.ClientURL(), listen(), func(c *agent.Config) { c.Keys = keys })
		if err := a.Start(t.Context()); err != nil {
			t.Fatalf("an agent with keys on a server without authentication: %v", err)
		}
		shutdown(t, a)
	})

	t.Run("secured server, no key", func(t *testing.T) {
		secured := newAgent(t, "", listen(), func(c *agent.Config) {
			c.StoreDir = t.TempDir()
			c.Keys = keys
		})
		if err := secured.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		defer shutdown(t, secured)
		a := newAgent(t, secured.Server().ClientURL(), listen(), nil)
		err := a.Start(t.Context())
		if !errors.Is(err, pmix.ErrUnreach) || !strings.Contains(err.Error(), "wants one and the agent has none") {
			t.Fatalf("Start without a key = %v", err)
		}
	})

	t.Run("keys without the agent's", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := security.EnsureKeys(filepath.Join(dir, "all")); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(security.KeyFile(filepath.Join(dir, "all"), security.RoleWatch))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(security.KeyFile(dir, security.RoleWatch), b, 0o600); err != nil {
			t.Fatal(err)
		}
		watchOnly, err := security.LoadKeys(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			name string
			url  string
			want string
		}{
			{"on a URL", "nats://127.0.0.1:4222", "keys: security: no key for the role: agent"},
			{"embedded", "", "embedded NATS server: security: no key for the role: a server needs every role's key"},
		} {
			cfg := agent.DefaultConfig("A", "n1")
			cfg.URL = tt.url
			cfg.StoreDir = t.TempDir()
			cfg.Keys = watchOnly
			if err := cfg.Validate(); !errors.Is(err, agent.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: Validate = %v", tt.name, err)
			}
		}
	})
}
