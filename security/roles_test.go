package security_test

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/security"
)

const wait = 10 * time.Second

// startSecured starts a server of cluster A that accepts the roles of
// fresh keys, its auth changed by mods.
func startSecured(t testing.TB, mods ...func(*cluster.Auth)) (*cluster.Server, *security.Keys) {
	t.Helper()
	keys, err := security.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	auth, err := keys.ServerAuth()
	if err != nil {
		t.Fatal(err)
	}
	for _, mod := range mods {
		mod(auth)
	}
	cfg := cluster.DefaultConfig("A", t.TempDir())
	cfg.Auth = auth
	cfg.Logger = clustertest.Logger(t)
	s, err := cluster.StartServer(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	clustertest.ShutdownAtCleanup(t, "server", s.Shutdown)
	return s, keys
}

// TestSignIn: only the keys of the client roles sign in on the client
// port; no key, a key of no role and the leaf key do not.
func TestSignIn(t *testing.T) {
	s, keys := startSecured(t)
	other, err := security.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Refused(t, s.ClientURL())
	clustertest.Refused(t, s.ClientURL(), other.Option(security.RoleAgent))
	clustertest.Refused(t, s.ClientURL(), keys.Option(security.RoleLeaf))
	for _, r := range []security.Role{security.RoleAgent, security.RoleRM, security.RoleWatch} {
		nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect(), keys.Option(r))
		if err != nil {
			t.Fatalf("%s refused: %v", r, err)
		}
		nc.Close()
	}
}

// TestRolePermissions: on a server with the event cache and the publish
// bucket, the rm and watch roles cannot purge or delete the cache, read or
// write the bucket, or listen to others' replies; watch publishes
// nothing; rm's events reach agents.
func TestRolePermissions(t *testing.T) {
	s, keys := startSecured(t)
	ctx := t.Context()
	agentNC := clustertest.Connect(t, s.ClientURL(), keys.Option(security.RoleAgent))
	js, err := jetstream.New(agentNC)
	if err != nil {
		t.Fatal(err)
	}
	cache, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PMIXBUS_EVENTS_A", Subjects: []string{"pmix.evt.A.>"}})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "PMIXBUS_PUBLISH"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.PutString(ctx, "n.job.secret", "for job only"); err != nil {
		t.Fatal(err)
	}
	events, err := agentNC.SubscribeSync("pmix.evt.A.ns.job.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := agentNC.Flush(); err != nil {
		t.Fatal(err)
	}

	refusedEverywhere := []struct {
		name    string
		subject string
		sub     bool
		seenAs  string // the subject the violation names, if not subject
	}{
		{"purge the cache", "$JS.API.STREAM.PURGE.PMIXBUS_EVENTS_A", false, ""},
		{"delete the cache", "$JS.API.STREAM.DELETE.PMIXBUS_EVENTS_A", false, ""},
		{"read the bucket", "$JS.API.DIRECT.GET.KV_PMIXBUS_PUBLISH", false, ""},
		// nats-server maps the domain's API to $JS.API before it checks.
		{"read the bucket in its domain", "$JS.A.API.DIRECT.GET.KV_PMIXBUS_PUBLISH", false, "$JS.API.DIRECT.GET.KV_PMIXBUS_PUBLISH"},
		{"read the bucket's stream", "$JS.API.STREAM.MSG.GET.KV_PMIXBUS_PUBLISH", false, ""},
		{"consume the bucket", "$JS.API.CONSUMER.CREATE.KV_PMIXBUS_PUBLISH", false, ""},
		{"write the bucket", "$KV.PMIXBUS_PUBLISH.n.job.secret", false, ""},
		{"listen to the bucket", "$KV.>", true, ""},
		{"listen to every reply", "_INBOX.>", true, ""},
		{"listen to control requests", "pmix.ctl.A.n1.spawn", true, ""},
	}
	for _, role := range []security.Role{security.RoleRM, security.RoleWatch, security.RoleLauncher} {
		t.Run(string(role), func(t *testing.T) {
			var v clustertest.Violations
			nc := clustertest.Connect(t, s.ClientURL(), keys.Option(role), v.Option())
			for _, tt := range refusedEverywhere {
				if tt.sub {
					if _, err := nc.SubscribeSync(tt.subject); err != nil {
						t.Fatal(err)
					}
				} else if err := nc.PublishRequest(tt.subject, nc.NewRespInbox(), []byte(`{"filter":"pmix.evt.A.>"}`)); err != nil {
					t.Fatal(err)
				}
				if err := nc.Flush(); err != nil {
					t.Fatal(err)
				}
				what := clustertest.Publish(tt.subject)
				if tt.seenAs != "" {
					what = clustertest.Publish(tt.seenAs)
				}
				if tt.sub {
					what = clustertest.Subscription(tt.subject)
				}
				v.Wait(t, wait, what)
			}

			// Control requests: a job credential's alone (and the
			// agents'); the launcher key only vouches for those.
			for _, ctl := range []string{"pmix.ctl.A.n1.spawn", "pmix.ctl.A.n1.spawn.job"} {
				if err := nc.Publish(ctl, []byte("{}")); err != nil {
					t.Fatal(err)
				}
				v.Fence(t, nc)
				if !v.Has(clustertest.Publish(ctl)) {
					t.Errorf("%s sent a control request on %s", role, ctl)
				}
			}

			// An event published as this role.
			subj := "pmix.evt.A.ns.job.-3001"
			if err := nc.Publish(subj, []byte("forged")); err != nil {
				t.Fatal(err)
			}
			if err := nc.Flush(); err != nil {
				t.Fatal(err)
			}
			if role != security.RoleRM {
				v.Wait(t, wait, clustertest.Publish(subj))
			} else if m, err := events.NextMsg(wait); err != nil || string(m.Data) != "forged" {
				t.Fatalf("rm's event: %v, %v", m, err)
			}
			// What each may receive.
			allowed := []string{"pmix.evt.>", "pmix.env.>", "pmix.outcome.>"}
			switch role {
			case security.RoleRM:
				allowed = []string{"pmix.evt.A.rm.>", "pmix.env.*.rm.>", "pmix.outcome.A.*", security.RMInboxPrefix + ".x"}
			case security.RoleLauncher:
				allowed = []string{"pmix.iof.A.job.>", security.LauncherInboxPrefix + ".x", security.WatchInboxPrefix + ".x"}
			}
			for _, subj := range allowed {
				if _, err := nc.SubscribeSync(subj); err != nil {
					t.Fatal(err)
				}
			}
			v.Fence(t, nc)
			for _, subj := range allowed {
				if v.Has(clustertest.Subscription(subj)) {
					t.Errorf("%s may not subscribe to %s", role, subj)
				}
			}
		})
	}

	// Still there: the cached event, the bucket and its value.
	info, err := cache.Info(ctx)
	if err != nil || info.State.Msgs != 1 { // rm's
		t.Fatalf("cache after the refusals: %+v, %v", info, err)
	}
	if e, err := kv.Get(ctx, "n.job.secret"); err != nil || string(e.Value()) != "for job only" || e.Revision() != 1 {
		t.Fatalf("bucket value after the refusals: %v, %v", e, err)
	}
}
