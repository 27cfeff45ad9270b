package security_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/cluster/clustertest"
	"github.com/pmixbus/pmixbus/security"
)

// TestJobCredentialScope: a launcher signed in with a job credential for
// jobX publishes its own job's events and control requests, and the
// server refuses, as a permission violation, an event on jobY's subject
// (a forged source) and a control request for jobY; an agent hears the
// one and not the other.
func TestJobCredentialScope(t *testing.T) {
	s, keys := startSecured(t)
	agentNC := clustertest.Connect(t, s.ClientURL(), keys.Option(security.RoleAgent))
	events, err := agentNC.SubscribeSync("pmix.evt.A.ns.>")
	if err != nil {
		t.Fatal(err)
	}
	controls, err := agentNC.SubscribeSync("pmix.ctl.A.n1.>")
	if err != nil {
		t.Fatal(err)
	}
	if err := agentNC.Flush(); err != nil {
		t.Fatal(err)
	}

	cred, err := keys.JobCredential("jobX")
	if err != nil {
		t.Fatal(err)
	}
	var v clustertest.Violations
	nc := clustertest.Connect(t, s.ClientURL(), cred.Option(), v.Option())
	for _, subj := range []string{"pmix.evt.A.ns.jobY.-145", "pmix.ctl.A.n1.kill.jobY", "pmix.ctl.A.n1.kill",
		"pmix.evt.global.A.-145", "$KV.PMIXBUS_JOBS.jobY", "$JS.API.STREAM.PURGE.KV_PMIXBUS_JOBS"} {
		if err := nc.Publish(subj, []byte("forged")); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		v.Wait(t, wait, clustertest.Publish(subj))
	}
	for _, subj := range []string{"pmix.jobstate.A.jobY", "pmix.iof.A.jobY.>", security.LauncherInboxPrefix + ".>", "_INBOX.>"} {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
		v.Wait(t, wait, clustertest.Subscription(subj))
	}

	for _, subj := range []string{"pmix.evt.A.ns.jobX.-145", "pmix.ctl.A.n1.kill.jobX"} {
		if err := nc.Publish(subj, []byte("own")); err != nil {
			t.Fatal(err)
		}
	}
	for _, subj := range []string{"pmix.jobstate.A.jobX", "pmix.jobstate.A.jobX.spawn", "pmix.iof.A.jobX.>", security.JobInboxPrefix("jobX") + ".>"} {
		if _, err := nc.SubscribeSync(subj); err != nil {
			t.Fatal(err)
		}
	}
	v.Fence(t, nc)
	for _, seen := range v.All() {
		if strings.Contains(seen, "jobX") {
			t.Errorf("refused its own job's: %s", seen)
		}
	}
	if m, err := events.NextMsg(wait); err != nil || m.Subject != "pmix.evt.A.ns.jobX.-145" || string(m.Data) != "own" {
		t.Fatalf("the event that reached the agent: %v, %v; want jobX's own", m, err)
	}
	if m, err := controls.NextMsg(wait); err != nil || m.Subject != "pmix.ctl.A.n1.kill.jobX" {
		t.Fatalf("the control request that reached the agent: %v, %v; want jobX's own", m, err)
	}
	if err := agentNC.Flush(); err != nil {
		t.Fatal(err)
	}
	if n, _, _ := events.Pending(); n != 0 {
		t.Errorf("%d more events reached the agent", n)
	}
}

// TestJobCredentialBinding: a job is bound to the first job key that
// signs in for it. While the job runs (its key is in the jobs bucket),
// the same credential signs in again (a reconnect), and another
// launcher's credential for that job is refused; once it has ended,
// another may take the nspace. A job key the launcher key did not vouch
// for, and a credential vouched for by another deployment's launcher
// key, are refused.
func TestJobCredentialBinding(t *testing.T) {
	s, keys := startSecured(t)
	first, err := keys.JobCredential("jobX")
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Connect(t, s.ClientURL(), first.Option()).Close()
	// The job runs: its launcher's key in the jobs bucket (package launch).
	js, err := jetstream.New(clustertest.Connect(t, s.ClientURL(), keys.Option(security.RoleAgent)))
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := js.CreateKeyValue(t.Context(), jetstream.KeyValueConfig{Bucket: "PMIXBUS_JOBS"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := jobs.PutString(t.Context(), "jobX", "running"); err != nil {
		t.Fatal(err)
	}
	clustertest.Connect(t, s.ClientURL(), first.Option()).Close() // again

	second, err := keys.JobCredential("jobX")
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Refused(t, s.ClientURL(), second.Option())
	if err := jobs.Delete(t.Context(), "jobX"); err != nil { // the job ended
		t.Fatal(err)
	}
	clustertest.Connect(t, s.ClientURL(), second.Option()).Close()
	other, err := security.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.JobCredential("jobZ")
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Refused(t, s.ClientURL(), stranger.Option())
	// The launcher's vouching for one job does not carry to another.
	forged := func(o *nats.Options) error {
		if err := first.Option()(o); err != nil {
			return err
		}
		o.User = "jobW"
		return nil
	}
	clustertest.Refused(t, s.ClientURL(), forged)

	// Another job is free.
	y, err := keys.JobCredential("jobY")
	if err != nil {
		t.Fatal(err)
	}
	clustertest.Connect(t, s.ClientURL(), y.Option()).Close()

	if _, err := (&security.Keys{}).JobCredential("jobX"); !errors.Is(err, security.ErrNoKey) {
		t.Errorf("a credential without the launcher key: %v, want ErrNoKey", err)
	}
	for _, bad := range []string{"", strings.Repeat("x", 300)} {
		if _, err := keys.JobCredential(bad); err == nil {
			t.Errorf("a credential for nspace %q: no error", bad)
		}
	}
}

// TestJobAuthorityServedByAgents: on servers pmixbus did not start (the
// auth callout of "pmixbus keys --nats-conf", no authority of their own)
// a sign-in with a job credential waits for an answer, which an agent's
// connection gives.
func TestJobAuthorityServedByAgents(t *testing.T) {
	s, keys := startSecured(t, func(a *cluster.Auth) { a.Authorizer = nil }) // as on servers of one's own
	cred, err := keys.JobCredential("jobX")
	if err != nil {
		t.Fatal(err)
	}
	// Nobody answers: refused after the server's auth timeout (2 s).
	clustertest.Refused(t, s.ClientURL(), cred.Option(), nats.Timeout(wait))

	ja, err := keys.JobAuthority(nil, clustertest.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	agentNC := clustertest.Connect(t, s.ClientURL(), keys.Option(security.RoleAgent))
	if _, err := ja.Serve(agentNC); err != nil {
		t.Fatal(err)
	}
	if err := agentNC.Flush(); err != nil {
		t.Fatal(err)
	}
	clustertest.Connect(t, s.ClientURL(), cred.Option()).Close()
	if _, err := (&security.Keys{}).JobAuthority(nil, nil); !errors.Is(err, security.ErrNoKey) {
		t.Errorf("an authority without the keys: %v, want ErrNoKey", err)
	}
}

// BenchmarkSignIn: a connection signed in with a role's key against one
// with a job credential for a fresh job (the servers' auth callout, a
// KV create): what a launcher pays per job.
func BenchmarkSignIn(b *testing.B) {
	s, keys := startSecured(b)
	connect := func(b *testing.B, opt nats.Option) {
		nc, err := nats.Connect(s.ClientURL(), nats.NoReconnect(), opt)
		if err != nil {
			b.Fatal(err)
		}
		nc.Close()
	}
	b.Run("role", func(b *testing.B) {
		for b.Loop() {
			connect(b, keys.Option(security.RoleLauncher))
		}
	})
	b.Run("job", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			cred, err := keys.JobCredential(fmt.Sprintf("bench-%d", i))
			if err != nil {
				b.Fatal(err)
			}
			connect(b, cred.Option())
		}
	})
}
