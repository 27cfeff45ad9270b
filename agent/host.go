package agent

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/router"
	"github.com/pmixbus/pmixbus/subjects"
)

// Environment variables a launched process needs; client.Init reads them.
const (
	EnvNspace     = proto.EnvNspace
	EnvRank       = proto.EnvRank
	EnvAgent      = proto.EnvAgent      // "unix:/path" or "tcp:127.0.0.1:port"
	EnvCredential = proto.EnvCredential // hex; the agent checks it at attach

	// EnvOpenMPIDaemonURI tells an Open MPI 4.1 program that a local
	// server launched it: without it Open MPI 4.1 (ORTE's schizo) takes a
	// process that Slurm, Flux or LSF did not start for a singleton and
	// tries to start its own daemon, whatever PMIx server is there. Its
	// value is a daemon name ("0.0") and the agent's address; Open MPI
	// 4.1 processes talk to their daemon only through PMIx, so neither is
	// used further (docs/cabi.md, "Open MPI 4.1 programs").
	EnvOpenMPIDaemonURI = "OMPI_MCA_orte_local_daemon_uri"
)

// Job describes a job (nspace) to the agent: what a host RM registers
// before launching its processes. Every agent hosting a proc of the job
// should be given the whole proc map, so that CUSTOM-range events reach
// the right nodes.
type Job struct {
	Nspace  string
	Session string
	// Info is job-level info given to its clients at attach and answered
	// by Get; a key the agent also computes from Procs (job size,
	// universe size, app number, local peers …: jobinfo.go) takes the
	// value given here, but for nspace, rank, cluster and hostname.
	Info []pmix.Info
	// Procs maps each rank to its node; the job size is its length. A job
	// that runs on several clusters (an MPMD job across clusters: one
	// nspace) names the nodes of the other clusters "cluster:node": its
	// collectives, named by its rank 0's cluster, and its NAMESPACE
	// events then span them all.
	Procs map[pmix.Rank]string
	// Apps are the job's application contexts (MPMD, as mpirun's
	// `-n 2 ./a : -n 2 ./b`), in order: the first Apps[0].Size ranks run
	// app 0, the next Apps[1].Size app 1, and so on (PMIX_APPNUM,
	// PMIX_APP_SIZE, PMIX_APPLDR …: jobinfo.go). Nil: one app of every
	// rank.
	Apps []App
}

// App is one application context of a job.
type App struct {
	// Size is its number of ranks, at least 1.
	Size int
	// Argv is its command line, program first (PMIX_APP_ARGV).
	Argv []string
}

// RegisterJob registers or replaces a job. Before it returns, the job's
// events are retained in the event cache for its local clients not
// attached yet (a JetStream consumer); ctx bounds that wait, and a job
// whose retention could not be set up in time is still registered (the
// agent retries when a client attaches, and logs the failure).
//
// Errors: pmix.ErrBadParam for an empty or over-long nspace, a session or
// node name over subjects.MaxNameLen, a proc with an invalid rank or no
// node, or apps whose sizes do not add up to the procs; ErrClosed after
// Shutdown.
func (a *Agent) RegisterJob(ctx context.Context, j Job) error {
	if j.Nspace == "" || len(j.Nspace) > pmix.MaxNspaceLen {
		return pmix.Errorf(pmix.ErrBadParam, "job nspace %s: %d bytes, want 1 to %d", pmix.Quote(j.Nspace), len(j.Nspace), pmix.MaxNspaceLen)
	}
	if err := subjects.CheckName("job session", j.Session); err != nil {
		return err
	}
	for r, n := range j.Procs {
		if !r.Valid() || n == "" || len(n) > subjects.MaxNameLen {
			return pmix.Errorf(pmix.ErrBadParam, "job %s: proc rank %v on node %s is invalid", j.Nspace, r, pmix.Quote(n))
		}
	}
	apps, err := appStarts(j)
	if err != nil {
		return err
	}
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return ErrClosed
	}
	nj := &job{nspace: j.Nspace, session: j.Session, info: slices.Clone(j.Info), procs: maps.Clone(j.Procs), apps: slices.Clone(j.Apps), appStart: apps}
	nj.home, nj.others = spans(a.cfg.Cluster, nj.procs)
	if old, ok := a.jobs[j.Nspace]; ok && (old.session != nj.session || !maps.Equal(old.procs, nj.procs)) {
		a.retention.StopJob(j.Nspace) // its filters change
	}
	old := a.jobs[j.Nspace]
	if old != nil {
		defer closeFence(old.fence) // nodefence.go
	}
	a.jobs[j.Nspace] = nj
	a.retention.RetainJob(nj.nspace, nj.session, nj.ranksOn(a.cfg.Node), func(r pmix.Rank) any {
		if e := a.expected[pmix.Proc{Nspace: nj.nspace, Rank: r}]; e != nil && e.conn != nil {
			return e.conn
		}
		return nil
	}) // under a.mu, which it never calls out from
	a.mu.Unlock()
	a.retention.Ensure(ctx, j.Nspace) // before returning, so the job's events are kept from now on
	var oldProcs map[pmix.Rank]string
	if old != nil {
		oldProcs = old.procs
	}
	a.livenessJobsChanged(ctx, nj.procs, oldProcs) // so is the node's key
	a.collectiveJobChanged(ctx, j.Nspace)
	return nil
}

// DeregisterJob forgets a job and its local clients; attached clients of
// the job are disconnected. Its PMIX_PERSIST_APP published data, and the
// PMIX_PERSIST_SESSION data of a session left without jobs, are removed
// within ctx (and 5 s); what cannot be removed in time is logged.
//
// Errors: ErrUnknownJob for a job not registered (or deregistered
// already); ErrClosed after Shutdown.
func (a *Agent) DeregisterJob(ctx context.Context, nspace string) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return ErrClosed
	}
	old, ok := a.jobs[nspace]
	if !ok {
		a.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrUnknownJob, nspace)
	}
	delete(a.jobs, nspace)
	defer closeFence(old.fence) // nodefence.go
	a.retention.StopJob(nspace)
	var conns []*clientConn
	var diags []*iof.Source
	for p, e := range a.expected {
		if p.Nspace == nspace {
			delete(a.expected, p)
			if e.conn != nil {
				conns = append(conns, e.conn)
			}
			diags = append(diags, takeDiagLocked(e))
		}
	}
	a.mu.Unlock()
	a.closeDiag(diags...)
	for _, c := range conns {
		c.close(pmix.NewError(pmix.EventJobEnd, "job deregistered"))
	}
	a.livenessJobsChanged(ctx, old.procs) // its procs no longer go down with the node
	a.publishLookupJobEnded(ctx, nspace)  // PMIX_PERSIST_APP and _SESSION data
	a.collectiveJobChanged(ctx, nspace)
	return nil
}

// ClientOption adjusts RegisterClient.
type ClientOption func(*clientEntry)

// WithUID restricts the client to processes of this user id (checked from
// the Unix socket's peer credentials). The default is the agent's own uid;
// -1 accepts any.
func WithUID(uid int) ClientOption { return func(e *clientEntry) { e.uid = uid } }

// RegisterClient registers a local process of a registered job and returns
// the environment to launch it with (EnvNspace, EnvRank, EnvAgent,
// EnvCredential, and EnvOpenMPIDaemonURI for Open MPI 4.1). The credential is fresh for every registration; a
// process attaching with it is the client nspace.rank and no other. As for
// RegisterJob, ctx bounds setting up the retention of the job's events
// for the client.
//
// Errors: ErrUnknownJob; pmix.ErrBadParam for an invalid rank;
// ErrClientRegistered (pmix.ErrDuplicateKey) if the proc is already
// registered; pmix.ErrOutOfResource if no credential could be made;
// ErrClosed after Shutdown.
func (a *Agent) RegisterClient(ctx context.Context, proc pmix.Proc, opts ...ClientOption) (map[string]string, error) {
	if !proc.Rank.Valid() {
		return nil, pmix.Errorf(pmix.ErrBadParam, "client rank %v: must be a real rank", proc.Rank)
	}
	// 24 bytes of credential, 8 of incarnation (lifecycle.go).
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return nil, pmix.Errorf(pmix.ErrOutOfResource, "credential: %w", err)
	}
	e, err := a.addClient(proc, hex.EncodeToString(raw[:24]), hex.EncodeToString(raw[24:]), opts)
	if err != nil {
		return nil, err
	}
	// A client not attached yet: the job's events must be kept for it from
	// now on, before the host launches it.
	a.retention.Ensure(ctx, proc.Nspace)
	return map[string]string{
		EnvNspace:           proc.Nspace,
		EnvRank:             strconv.FormatUint(uint64(proc.Rank), 10),
		EnvAgent:            a.addr,
		EnvCredential:       e.credential,
		EnvOpenMPIDaemonURI: "0.0;" + a.addr,
	}, nil
}

// addClient records a registered client.
func (a *Agent) addClient(proc pmix.Proc, credential, incarnation string, opts []ClientOption) (*clientEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	j, ok := a.jobs[proc.Nspace]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownJob, proc.Nspace)
	}
	if _, dup := a.expected[proc]; dup {
		return nil, fmt.Errorf("%w: %v", ErrClientRegistered, proc)
	}
	e := &clientEntry{proc: proc, job: j, credential: credential, incarnation: incarnation, uid: os.Getuid()}
	for _, o := range opts {
		o(e)
	}
	a.expected[proc] = e
	a.retention.ClientRegistered(proc)
	return e, nil
}

// DeregisterClient forgets a local client; if it is attached, it is
// disconnected. Its PMIX_PERSIST_PROC published data is removed within ctx
// (and 5 s).
//
// Errors: ErrUnknownClient for a proc not registered (or deregistered
// already); ErrClosed after Shutdown.
func (a *Agent) DeregisterClient(ctx context.Context, proc pmix.Proc) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return ErrClosed
	}
	e, ok := a.expected[proc]
	var diag *iof.Source
	var conn *clientConn // read under a.mu: detach clears it
	if ok {
		delete(a.expected, proc)
		a.retention.ClientGone(proc) // nothing is owed to a client that is gone
		diag = takeDiagLocked(e)
		conn = e.conn
	}
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnknownClient, proc)
	}
	a.closeDiag(diag)
	if conn != nil {
		conn.close(pmix.NewError(pmix.ErrInvalidOperation, "client deregistered by the host"))
	}
	a.publishLookupProcEnded(ctx, proc) // PMIX_PERSIST_PROC data
	return nil
}

// authenticate checks a hello: the proc is registered, the credential is
// the one issued for it, the peer's uid is allowed, and it is not already
// attached. On success the connection is bound to the entry.
func (a *Agent) authenticate(proc pmix.Proc, credential string, uid int, cc *clientConn) (*clientEntry, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.expected[proc]
	// Compare in constant time even for unknown procs.
	want := ""
	if ok {
		want = e.credential
	}
	if subtle.ConstantTimeCompare([]byte(want), []byte(credential)) != 1 || !ok {
		return nil, pmix.Errorf(pmix.ErrInvalidCred, "no client %v with that credential", proc)
	}
	if e.uid >= 0 && uid >= 0 && e.uid != uid {
		return nil, pmix.Errorf(pmix.ErrNoPermissions, "client %v must run as uid %d, peer is uid %d", proc, e.uid, uid)
	}
	if e.conn != nil {
		return nil, fmt.Errorf("%w: %v", ErrAlreadyAttached, proc)
	}
	e.conn = cc
	e.state.Attached, e.state.Finalized = true, false // a process attaching after another finalized
	a.retention.ClientAttached(proc, cc)              // stamped before the hello's reply (AwaitStamp)
	a.attachedChangedLocked()
	return e, nil
}

// detach unbinds a connection from its entry. A socket lost without
// Finalize is reported first (lifecycle.go), so that the event is out by
// the time the client no longer counts as attached.
func (a *Agent) detach(e *clientEntry, cc *clientConn) {
	if t, lost := a.lostWithoutFinalize(e, cc); lost {
		if err := a.raise(event.TerminationEvent(t)); err != nil {
			cc.logger().Warn("raising the termination of a client that left without finalizing", "err", err)
		}
		_ = a.ProcTerminated(a.ctx, t.Proc, true) // its connected groups hear of it
	}
	a.breakFence(e.proc.Nspace) // a rank gone: its job's node barrier can complete no more
	a.mu.Lock()
	if e.conn == cc {
		e.conn = nil
		a.retention.ClientDetached(e.proc)
		a.attachedChangedLocked()
	}
	a.mu.Unlock()
	a.retention.Ensure(a.ctx, e.proc.Nspace)
	a.publishLookupDetached(cc, e) // its requests end, PMIX_PERSIST_PROC data goes
	a.collectiveDetached(cc)
	a.iofDetached(cc)
}

// Notify sends an event as the host RM: it has no source proc (RFC0002).
// The target comes from the range: NAMESPACE needs pmix.KeyNspace (or
// affected procs of one nspace; a "cluster:nspace" name targets another
// cluster); SESSION needs pmix.KeySessionID; LOCAL is this node unless
// pmix.KeyHostname names another; CUSTOM needs pmix.KeyEventCustomRange;
// RM goes to the host RM only (OnRMEvent), GLOBAL to every cluster.
// Environment events (environment true) obey their range the same way, and
// reach only agents with a registration that wants environment events of
// the code (see event.Scopes).
//
// It returns the event's id, which the outcome reports of the chains it
// causes carry (event.OutcomeReport.EventID).
//
// Errors: pmix.ErrBadParam for a missing target, PROC_LOCAL, an invalid
// range, or a target name too long for a subject; pmix.ErrUnreach if NATS
// refused the publish; ErrClosed before Start or after Shutdown; ctx.Err()
// if ctx ended first.
//
// A NAMESPACE event whose pmix.KeyNspace is a connect's new nspace that
// this agent knows goes to the group's members, on every cluster, as a
// CUSTOM event; so does a CUSTOM event's target of such an nspace
// (groupEvent).
func (a *Agent) Notify(ctx context.Context, code pmix.Status, rng pmix.Range, environment bool, info []pmix.Info) (string, error) {
	return a.notify(ctx, "", code, rng, environment, info)
}

// notify is Notify with the event's id, or "" for the next of the agent's.
func (a *Agent) notify(ctx context.Context, id string, code pmix.Status, rng pmix.Range, environment bool, info []pmix.Info) (string, error) {
	if id == "" {
		id = a.nextEventID()
	}
	rng, info, err := a.groupEvent(rng, info)
	if err != nil {
		return "", err
	}
	m := &event.Message{
		ID: id, Code: code, Range: rng, Environment: environment,
		Source: bus.Origin{Cluster: string(a.cfg.Cluster), Node: a.cfg.Node},
		Info:   info, Time: time.Now(),
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if a.isClosed() || a.router == nil {
		return "", fmt.Errorf("%w: not started, or shut down", ErrClosed)
	}
	return m.ID, a.link.Publish(m, nil)
}

// OnRMEvent calls f for every PMIX_RANGE_RM event in the agent's cluster,
// job and environment events alike, one call at a time, in arrival order
// for each kind. The agent subscribes when the first function is added.
//
// Errors: ErrClosed after Shutdown; pmix.ErrUnreach if NATS refused the
// subscription.
func (a *Agent) OnRMEvent(ctx context.Context, f func(*event.Message)) error {
	if err := a.addRMFunc(f); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, flushTimeout)
	defer cancel()
	if err := a.nc.FlushWithContext(ctx); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "waiting for NATS to know the RM subscriptions: %w", err)
	}
	return nil
}

// addRMFunc adds f and subscribes to RM events if not yet done.
func (a *Agent) addRMFunc(f func(*event.Message)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrClosed
	}
	a.rmFuncs.Store(appendCopy(a.rmFuncs.Load(), f))
	if a.rmSubs != nil {
		return nil
	}
	handle := func(msg *nats.Msg) {
		m, err := event.UnmarshalMessage(msg.Data)
		if err != nil {
			a.log.Warn("dropping malformed RM event", "subject", msg.Subject, "err", err)
			return
		}
		a.rmMu.Lock()
		defer a.rmMu.Unlock()
		for _, f := range *a.rmFuncs.Load() {
			f(m)
		}
	}
	rm := subjects.RM(string(a.cfg.Cluster))
	for _, sc := range []subjects.Scope{rm, rm.Environment()} {
		sub, err := a.nc.Subscribe(sc.Wildcard(), handle)
		if err != nil {
			for _, s := range a.rmSubs {
				_ = s.Unsubscribe()
			}
			a.rmSubs = nil
			return pmix.Errorf(pmix.ErrUnreach, "subscribing to RM events: %w", err)
		}
		a.rmSubs = append(a.rmSubs, sub)
	}
	return nil
}

// OnOutcome calls f with the outcome of every handler chain this agent
// runs, as soon as the chain ends. f must not block for long.
func (a *Agent) OnOutcome(f func(event.OutcomeReport)) {
	a.mu.Lock()
	a.outFuncs.Store(appendCopy(a.outFuncs.Load(), f))
	a.mu.Unlock()
}

// appendCopy returns a new slice of *old and v, leaving *old as it was for
// readers that loaded it.
func appendCopy[T any](old *[]T, v T) *[]T {
	var s []T
	if old != nil {
		s = slices.Clone(*old)
	}
	s = append(s, v)
	return &s
}

// attachedChangedLocked marks the attached clients changed after a
// connection was bound or unbound; recipients rebuilds the list when next
// asked, once for however many changed (rebuilding it at every attach made
// attaching N clients cost O(N²)). Called with a.mu held.
func (a *Agent) attachedChangedLocked() { a.attachedStale.Store(true) }

// rebuildAttachedLocked publishes the list of attached clients. Called
// with a.mu held.
func (a *Agent) rebuildAttachedLocked() {
	out := make([]router.Recipient, 0, len(a.expected))
	for _, e := range a.expected {
		if e.conn != nil {
			out = append(out, e.conn)
		}
	}
	a.attached.Store(&out)
}
