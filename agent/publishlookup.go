package agent

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/publishlookup"
)

// publishLookup serves the publish, lookup and unpublish frames of the
// agent's clients (package publishlookup does the work), and tells the
// service when persistence ends: a client that detaches (PROC), a job
// deregistered (APP), the last job of a session deregistered (SESSION).
//
// Requests run on goroutines of their own, so a lookup that waits blocks
// neither its client's other requests nor the socket. Each runs in the
// context of its connection, cancelled when the client detaches or the
// agent shuts down.
type publishLookup struct {
	svc           *publishlookup.Service
	local, global *jetstream.NATSKV // the same handle when there is no hub
	ctx           context.Context   // ends at Shutdown
	stop          context.CancelFunc

	mu    sync.Mutex
	conns map[*clientConn]*plConn
}

// plConn is a connection's requests in flight and the goroutines that run
// them.
type plConn struct {
	ctx    context.Context
	cancel context.CancelFunc
	who    publishlookup.Identity
	work   chan func()    // unbuffered: a send succeeds when a worker is idle
	wg     sync.WaitGroup // the workers
}

// run runs f on an idle worker of the connection, or on a new one. Workers
// stay until the connection goes, so that a client's next request runs on
// a goroutine whose stack has grown already rather than on a fresh one.
func (pc *plConn) run(a *Agent, f func()) {
	select {
	case pc.work <- f:
		return
	default:
	}
	pc.wg.Add(1)
	a.goFunc(func() {
		defer pc.wg.Done()
		for {
			f()
			select {
			case f = <-pc.work:
			case <-pc.ctx.Done():
				return
			}
		}
	})
}

// cleanupTimeout bounds the removal of data whose persistence ended.
const cleanupTimeout = 5 * time.Second

// startPublishLookup makes the service on the agent's connection. The
// buckets are provisioned by the first request that needs them, so a
// cluster whose hub is unreachable still starts; but where GLOBAL data
// lives is settled here, once (globalDomain).
func (a *Agent) startPublishLookup(ctx context.Context) error {
	domain, err := a.globalDomain(ctx)
	if err != nil {
		return err
	}
	kv := func(domain string, replicas int) (*jetstream.NATSKV, error) {
		return jetstream.NewKV(jetstream.KVConfig{
			Conn: a.nc, Domain: domain, Bucket: a.cfg.PublishBucket, Replicas: replicas,
			Description: "pmixbus PMIx_Publish data (publishlookup)",
		})
	}
	local, err := kv(a.cfg.Cluster.Domain(), a.replicas)
	if err != nil {
		return err
	}
	global := local
	if domain != a.cfg.Cluster.Domain() {
		if global, err = kv(domain, 1); err != nil {
			return err
		}
	}
	svc, err := publishlookup.New(publishlookup.Config{
		Cluster: a.cfg.Cluster, Local: local, Global: global,
		Logger: a.log.With("component", "publishlookup"),
	})
	if err != nil {
		return err
	}
	a.log.Info("GLOBAL publish/lookup data", "domain", domain)
	ctx, stop := context.WithCancel(context.Background())
	a.pl = &publishLookup{svc: svc, local: local, global: global, ctx: ctx, stop: stop, conns: make(map[*clientConn]*plConn)}
	return nil
}

// globalDomainWait bounds the search for the GLOBAL domain at Start: ample
// for the leaf link of a server that has just started to come up.
const globalDomainWait = 5 * time.Second

// globalDomain is the one rule for where GLOBAL data lives (the JetStream
// domain of the bucket every cluster shares):
//
//   - Config.GlobalDomain, when given, as it is (if it does not answer yet,
//     GLOBAL requests are PMIX_ERR_UNREACH until it does);
//   - else the domain of the server at the top of the topology
//     (cluster.TopDomain): the hub the cluster links to, whatever its
//     name, or the cluster's own server when it links to none;
//   - else a domain named cluster.DefaultHubDomain, if one answers: a hub
//     in an external NATS deployment.
//
// Until globalDomainWait has passed (or ctx ended) it keeps asking, so that
// a leaf link that is still coming up is waited for; then it fails with an
// error that names the setting that fixes it.
func (a *Agent) globalDomain(ctx context.Context) (string, error) {
	if d := a.cfg.GlobalDomain; d != "" {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		if err := cluster.CheckJetStream(pctx, a.nc, d); err != nil {
			a.log.Warn("the GLOBAL publish/lookup domain does not answer (yet)", "domain", d, "err", err)
		}
		return d, nil
	}
	ctx, cancel := context.WithTimeout(ctx, globalDomainWait)
	defer cancel()
	retry := time.NewTicker(100 * time.Millisecond)
	defer retry.Stop()
	for {
		if d, ok := a.askGlobalDomain(ctx); ok {
			return d, nil
		}
		select {
		case <-retry.C:
		case <-ctx.Done():
			return "", fmt.Errorf("GLOBAL data: no JetStream domain to keep it in: no pmixbus server at the top of the "+
				"NATS topology answered (a hub, or a server linked to no other), nor a domain %q; check the leaf link "+
				"to the hub, or give the agent the hub's domain with --global-domain <domain> (Config.GlobalDomain)",
				cluster.DefaultHubDomain)
		}
	}
}

// askGlobalDomain asks once for the top's domain, then for the default
// hub's. Each question gets a second at most: one lost on a link that is
// going down must not take the whole wait.
func (a *Agent) askGlobalDomain(ctx context.Context) (string, bool) {
	tctx, cancel := context.WithTimeout(ctx, time.Second)
	d, err := cluster.TopDomain(tctx, a.nc)
	cancel()
	if err == nil {
		return d, true
	}
	a.log.Debug("asking the top of the topology for its JetStream domain", "err", err)
	hctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if cluster.CheckJetStream(hctx, a.nc, cluster.DefaultHubDomain) == nil {
		return cluster.DefaultHubDomain, true
	}
	return "", false
}

// closePublishLookup cancels the requests in flight, waits (until ctx
// ends) for the watches of finished lookups to stop, and releases the
// buckets' subscriptions. The connections are closed first, so no request
// starts after it.
func (a *Agent) closePublishLookup(ctx context.Context) {
	p := a.pl
	if p == nil {
		return
	}
	p.stop()
	if err := p.svc.Close(ctx); err != nil {
		a.log.Warn("stopping publish/lookup watches", "err", err)
	}
	_ = p.local.Close()
	if p.global != p.local {
		_ = p.global.Close()
	}
}

// publishLookup serves a publish, lookup or unpublish frame: it answers
// from a worker of the connection, with the identity the agent
// authenticated.
func (cc *clientConn) publishLookup(f *proto.Frame) {
	p := cc.a.pl
	pc, err := p.conn(cc)
	if err != nil {
		cc.reply(f, err, nil)
		return
	}
	pc.run(cc.a, func() {
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		var err error
		switch f.Type {
		case proto.TypePublish:
			err = p.svc.Publish(pc.ctx, pc.who, f.Info)
		case proto.TypeLookup:
			var found []publishlookup.Datum
			found, err = p.svc.Lookup(pc.ctx, pc.who, f.Keys, f.Info)
			for _, d := range found {
				r.Data = append(r.Data, proto.PData{Proc: d.Proc, Key: d.Key, Value: d.Value})
			}
		case proto.TypeUnpublish:
			err = p.svc.Unpublish(pc.ctx, pc.who, f.Keys, f.Info)
		}
		r.SetErr(err)
		// Not cc.reply: a failed write means the connection is closing,
		// and its reader sees to that; closing it from here would wait on
		// the detach that waits on this goroutine.
		_ = cc.write(r)
	})
}

// conn returns the requests state of an attached connection, making it on
// the first request.
func (p *publishLookup) conn(cc *clientConn) (*plConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pc := p.conns[cc]; pc != nil {
		return pc, nil
	}
	// Checked under p.mu: a connection that closes after this is seen by
	// publishLookupDetached, which takes p.mu after close marked it.
	e, _, ok := cc.attached()
	if !ok {
		return nil, pmix.NewError(pmix.ErrLostConnectionToClient, "client detached")
	}
	cc.mu.Lock()
	uid, gid := cc.uid, cc.gid
	cc.mu.Unlock()
	ctx, cancel := context.WithCancel(p.ctx)
	pc := &plConn{ctx: ctx, cancel: cancel, work: make(chan func()), who: publishlookup.Identity{
		Cluster: cc.a.cfg.Cluster, Node: cc.a.cfg.Node, Session: e.job.session, Proc: e.proc, UID: uid, GID: gid,
	}}
	p.conns[cc] = pc
	return pc, nil
}

// publishLookupDetached ends a client's requests in flight and removes what
// it published with PMIX_PERSIST_PROC: it finalized, died or was dropped.
// Called by detach, once per connection.
func (a *Agent) publishLookupDetached(cc *clientConn, e *clientEntry) {
	p := a.pl
	if p == nil {
		return
	}
	p.mu.Lock()
	pc := p.conns[cc]
	delete(p.conns, cc)
	p.mu.Unlock()
	if pc != nil {
		pc.cancel()
		pc.wg.Wait()
	}
	a.publishLookupProcEnded(context.Background(), e.proc)
}

// publishLookupProcEnded removes proc's PMIX_PERSIST_PROC data.
func (a *Agent) publishLookupProcEnded(ctx context.Context, proc pmix.Proc) {
	if a.pl == nil {
		return
	}
	ctx, cancel := a.cleanupContext(ctx)
	defer cancel()
	if err := a.pl.svc.ProcEnded(ctx, proc); err != nil {
		a.log.Warn("removing PMIX_PERSIST_PROC data", "proc", proc.String(), "err", err)
	}
}

// publishLookupJobEnded removes the PMIX_PERSIST_APP data of a deregistered
// job's procs, and the PMIX_PERSIST_SESSION data of sessions the agent has
// no job of any more.
func (a *Agent) publishLookupJobEnded(ctx context.Context, nspace string) {
	if a.pl == nil {
		return
	}
	ctx, cancel := a.cleanupContext(ctx)
	defer cancel()
	if err := a.pl.svc.JobEnded(ctx, nspace); err != nil {
		a.log.Warn("removing PMIX_PERSIST_APP data", "nspace", nspace, "err", err)
	}
	live := map[string]bool{}
	a.mu.Lock()
	for _, j := range a.jobs {
		live[j.session] = true
	}
	a.mu.Unlock()
	if err := a.pl.svc.SessionsEnded(ctx, live); err != nil {
		a.log.Warn("removing PMIX_PERSIST_SESSION data", "err", err)
	}
}

// LookupsWaiting returns the number of PMIX_WAIT lookups of the agent's
// clients that wait with every bucket they wait on followed, so that the
// next publish of a key they wait for wakes them
// (publishlookup.Service.Waiting). For benchmarks and tests.
func (a *Agent) LookupsWaiting() int {
	if a.pl == nil {
		return 0
	}
	return a.pl.svc.Waiting()
}
