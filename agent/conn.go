package agent

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/router"
)

// clientConn is one attached client: its socket, its registry (the chains
// the agent runs for it) and its invocations in flight.
type clientConn struct {
	a *Agent
	c net.Conn
	r *proto.Reader
	w *sender
	// logp is the agent's logger, then, after hello, the client's: read
	// by other goroutines (close at Shutdown) while serve sets it.
	logp atomic.Pointer[slog.Logger]

	entry    *clientEntry
	reg      *bus.Registry
	uid, gid int // the peer's, from SO_PEERCRED; -1 unknown
	// version is the protocol version of the connection, the lower of the
	// client's and proto.Version; set at hello, before any invoke.
	version uint32

	mu      sync.Mutex
	seq     uint64
	pending map[uint64]pendingInvoke // by value: an invocation costs no allocation of its own
	grown   bool                     // pending held more than a few: replace it once empty, maps never shrink
	closed  bool
	once    sync.Once

	// dropped: the agent ended the connection (a protocol error, a client
	// not reading), not the client; its process may well be alive.
	dropped  atomic.Bool
	released sync.Once // the entry's detach, see release
	// notifyRefused: a notify of this client was refused and logged.
	notifyRefused atomic.Bool
	admitted      bool // counted in Agent.hellos; false: one too many waiting to say hello
	// logs holds a token per log frame whose record is not stored yet
	// (log.go); used by the dispatch goroutine, made on the first log.
	logs chan struct{}
	// win bounds the client's chains in flight; the events beyond it wait
	// (router.Window).
	win *router.Window
	// fenceTail is closed when the client's last fence on its job's node
	// barrier is answered (nodefence.go); used by the dispatch goroutine.
	fenceTail chan struct{}
}

type pendingInvoke struct {
	call *bus.Call
	done bus.Done
}

// newClientConn is called by the accept loop, so connections are counted
// against MaxPendingHello in the order they were accepted. The buffered
// reader comes after hello: until then the peer is nobody.
func newClientConn(a *Agent, c net.Conn) *clientConn {
	cc := &clientConn{
		a: a, c: c, pending: make(map[uint64]pendingInvoke),
		w: newSender(c, a.cfg.ClientQueueLimit, a.cfg.ClientStallTimeout, a.cfg.WriteTimeout, a.done), admitted: a.hellos.enter(a.cfg.MaxPendingHello),
	}
	cc.win = router.NewWindow(a.cfg.ChainWindow, a.cfg.ClientQueueLimit, a.cfg.ClientStallTimeout, cc.w.cut)
	cc.logp.Store(a.log)
	return cc
}

func (cc *clientConn) logger() *slog.Logger { return cc.logp.Load() }

// helloGate counts the connections that have not said hello yet.
type helloGate struct {
	waiting  atomic.Int64
	refused  atomic.Int64 // since the last warning
	lastWarn atomic.Int64 // Unix nanoseconds
}

// enter counts one more connection unless limit are waiting already.
func (g *helloGate) enter(limit int) bool {
	if g.waiting.Add(1) > int64(limit) {
		g.waiting.Add(-1)
		return false
	}
	return true
}

func (g *helloGate) leave() { g.waiting.Add(-1) }

// refuse logs a refused connection, at most once a second for a flood.
func (g *helloGate) refuse(log *slog.Logger, limit int) {
	g.refused.Add(1)
	now, last := time.Now().UnixNano(), g.lastWarn.Load()
	if now-last >= int64(time.Second) && g.lastWarn.CompareAndSwap(last, now) {
		log.Warn("closing connections: too many are waiting to say hello", "limit", limit, "refused", g.refused.Swap(0))
	}
}

// write queues a frame for the client (see sender): it never waits for
// the client to read.
func (cc *clientConn) write(f *proto.Frame) error { return cc.w.send(f) }

// cutOff is called when the client's sender stops: why is the reason it
// cut the client off (not reading) or the write error, nil after close.
func (cc *clientConn) cutOff(why error) {
	if why == nil || cc.isClosing() {
		return
	}
	if pmix.StatusOf(why) == pmix.ErrOutOfResource || errors.Is(why, os.ErrDeadlineExceeded) {
		cc.dropped.Store(true) // stalled, not gone
	}
	if pmix.StatusOf(why) == pmix.ErrOutOfResource {
		cc.logger().Warn("dropping a client that does not read what it is sent", "err", why)
	}
	// Not from the sender's goroutine: close waits for it to end.
	if !cc.a.goFunc(func() { cc.close(nil) }) {
		_ = cc.c.Close() // Shutdown closes it anyway
	}
}

func (cc *clientConn) isClosing() bool {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.closed
}

func (cc *clientConn) reply(req *proto.Frame, err error, fill func(*proto.Frame)) {
	f := &proto.Frame{Type: proto.TypeReply, Seq: req.Seq}
	if err != nil {
		f.SetErr(err)
	} else if fill != nil {
		fill(f)
	}
	if werr := cc.write(f); werr != nil {
		cc.close(nil)
	}
}

// serve authenticates the client, then reads its frames until it leaves.
func (cc *clientConn) serve() {
	defer cc.close(nil)
	if !cc.w.start(cc.a.goFunc, cc.cutOff) {
		return // Shutdown began
	}
	if !cc.admitted {
		cc.a.hellos.refuse(cc.logger(), cc.a.cfg.MaxPendingHello)
		cc.fail(pmix.Errorf(pmix.ErrOutOfResource, "%d connections are waiting to say hello already; try again", cc.a.cfg.MaxPendingHello))
		return
	}
	f, err := cc.readHello()
	if err == nil && f.Type == proto.TypeOutputAttach {
		cc.a.hellos.leave()
		cc.feedOutput(f) // outputfeed.go: a launcher, not a client
		return
	}
	if err == nil {
		err = cc.hello(f)
	}
	cc.a.hellos.leave()
	if err != nil {
		if cc.a.ctx.Err() == nil {
			cc.logger().Warn("client refused", "remote", cc.c.RemoteAddr().String(), "err", err)
		}
		cc.fail(err)
		return
	}
	cc.r = proto.NewReader(cc.c, cc.a.cfg.MaxFrame)
	cc.logp.Store(cc.logger().With("client", cc.entry.proc.String()))
	cc.logger().Debug("client attached")
	for {
		f, err := cc.r.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				cc.logger().Warn("dropping client after a bad frame", "err", err)
				cc.fail(err)
			}
			return
		}
		if !cc.dispatch(f) {
			return
		}
	}
}

// fail tells the client why it is being dropped, if the socket still works.
func (cc *clientConn) fail(err error) {
	cc.dropped.Store(true)
	f := &proto.Frame{Type: proto.TypeError}
	f.SetErr(err)
	if f.Status == pmix.ErrGeneral {
		f.Status = pmix.ErrCommFailure
	}
	cc.w.finish(f, time.Second)
}

// readHello reads the connection's first frame, within HelloTimeout.
func (cc *clientConn) readHello() (*proto.Frame, error) {
	stop := context.AfterFunc(cc.a.ctx, func() { _ = cc.c.Close() }) // Shutdown does not wait out HelloTimeout
	defer stop()
	_ = cc.c.SetReadDeadline(time.Now().Add(cc.a.cfg.HelloTimeout))
	// Unbuffered, so the reader made after hello loses nothing, and no
	// larger than a hello needs, whatever the length prefix claims.
	f, err := proto.ReadFrame(cc.c, min(proto.MaxHelloFrame, cc.a.cfg.MaxFrame))
	if err != nil {
		return nil, err
	}
	_ = cc.c.SetReadDeadline(time.Time{})
	return f, nil
}

func (cc *clientConn) hello(f *proto.Frame) error {
	if f.Type != proto.TypeHello {
		return pmix.Errorf(pmix.ErrInvalidOperation, "first frame is %v, want hello", f.Type)
	}
	if f.Version < proto.MinVersion {
		return pmix.Errorf(pmix.ErrNotSupported, "protocol version %d, agent speaks %d to %d", f.Version, proto.MinVersion, proto.Version)
	}
	uid, gid, err := peerCred(cc.c)
	if err != nil {
		return pmix.Errorf(pmix.ErrInvalidCred, "reading peer credentials: %w", err)
	}
	e, err := cc.a.authenticate(pmix.Proc{Nspace: f.Nspace, Rank: f.Rank}, f.Credential, uid, cc)
	if err != nil {
		return err
	}
	cc.a.retention.AwaitStamp(e.proc, cc) // before the client can publish anything

	reg, err := bus.NewRegistry(bus.Config{
		Self:           cc.a.origin(e),
		DefaultTimeout: cc.a.cfg.HandlerTimeout,
		Logger:         cc.logger(),
	})
	if err != nil {
		cc.a.detach(e, cc)
		return err
	}
	cc.mu.Lock()
	cc.entry, cc.reg, cc.uid, cc.gid = e, reg, uid, gid
	cc.version = min(f.Version, proto.Version)
	cc.mu.Unlock()
	info := cc.a.attachInfo(e, uid) // jobinfo.go
	r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq, Version: cc.version}
	r.Info = slices.Concat([]pmix.Info{
		pmix.NewInfo(pmix.KeyClusterID, pmix.String(string(cc.a.cfg.Cluster))),
		pmix.NewInfo(pmix.KeyHostname, pmix.String(cc.a.cfg.Node)),
		pmix.NewInfo(pmix.KeySessionID, pmix.String(e.job.session)),
		pmix.NewInfo(pmix.KeyNspace, pmix.String(e.proc.Nspace)),
		pmix.NewInfo(pmix.KeyRank, pmix.RankValue(e.proc.Rank)),
	}, info)
	if err := cc.helloReply(r, cc.a.jobFence(e.job)); err != nil { // nodefence.go
		cc.close(nil)
	}
	return nil
}

// dispatch handles one frame; false ends the connection.
func (cc *clientConn) dispatch(f *proto.Frame) bool {
	switch f.Type {
	case proto.TypeRegister:
		id, replied, err := cc.a.router.Register(cc.a.ctx, cc, f.Codes, f.Info, cc.invoke)
		if err != nil {
			cc.reply(f, err, nil)
			break
		}
		cc.reply(f, nil, func(r *proto.Frame) { r.ID = uint64(id) })
		replied()
	case proto.TypeDeregister:
		cc.reply(f, cc.a.router.Deregister(cc, cc.reg, bus.ID(f.ID)), nil)
	case proto.TypeNotify:
		err := cc.notify(f)
		if err != nil && cc.notifyRefused.CompareAndSwap(false, true) {
			// The C library does not wait for this answer (a blocking
			// notify returns once sent, as OpenPMIx's): say it here,
			// once per connection.
			cc.logger().Warn("a client's event was refused; later refusals on this connection are not logged", "code", f.Code, "range", f.Range, "err", err)
		}
		cc.reply(f, err, nil)
	case proto.TypeInvokeDone:
		d := proto.DoneOf(f)
		cc.completed(&d)
		f.Recycle()
	case proto.TypeInvokeDoneBatch:
		// The chains the completions end, and those they let start from
		// the client's backlog, write to it: in one write.
		cc.w.cork()
		for i := range f.Dones {
			cc.completed(&f.Dones[i])
		}
		cc.w.uncork(true)
		f.Recycle() // it and its entries serve the next frame (their lists are the chains')
	case proto.TypePublish, proto.TypeLookup, proto.TypeUnpublish:
		cc.publishLookup(f) // publishlookup.go
	case proto.TypeFence, proto.TypeCommit, proto.TypeGet, proto.TypeConnect, proto.TypeDisconnect:
		cc.collective(f) // collective.go
	case proto.TypeGroupConstruct, proto.TypeGroupDestruct, proto.TypeGroupInvite, proto.TypeGroupJoin, proto.TypeGroupLeave:
		cc.group(f) // group.go
	case proto.TypeAbort:
		cc.reply(f, cc.abort(cc.entry, f), nil) // lifecycle.go
	case proto.TypeLog:
		cc.log(f) // log.go
	case proto.TypeIOFPush, proto.TypeIOFPull, proto.TypeIOFDeregister:
		cc.iofRequest(f) // iofclient.go
	case proto.TypeSpawn:
		cc.spawn(f) // spawn.go
	case proto.TypeJobControl:
		cc.jobControl(f) // jobctl.go
	case proto.TypeQuery:
		cc.query(f) // query.go
	case proto.TypeFinalize:
		cc.a.finalized(cc.entry)
		cc.release(cc.entry)
		cc.reply(f, nil, nil)
		return false
	default:
		cc.fail(pmix.Errorf(pmix.ErrInvalidOperation, "unexpected %v frame from a client", f.Type))
		return false
	}
	return true
}

func (cc *clientConn) notify(f *proto.Frame) error {
	switch {
	case f.Range == pmix.RangeProcLocal:
		return pmix.Errorf(pmix.ErrBadParam, "PMIX_RANGE_PROC_LOCAL events stay in the client; the agent never sees them")
	case !f.Range.Valid():
		return pmix.Errorf(pmix.ErrBadParam, "invalid range %v", f.Range)
	}
	info := f.Info
	if f.Range == pmix.RangeCustom {
		// A target of a connect's new nspace stands for its members.
		var err error
		if _, info, err = cc.a.groupEvent(f.Range, info); err != nil {
			return err
		}
	}
	m := &event.Message{
		ID:     cc.a.nextEventID(),
		Code:   f.Code,
		Range:  f.Range,
		Source: cc.a.origin(cc.entry), // stamped here, whatever the client claims
		Info:   info,
		Time:   time.Now(),
	}
	return cc.a.link.Publish(m, &event.Sender{Proc: cc.entry.proc, Session: cc.entry.job.session})
}

// invoke is the bus.Handler of every registration of this client: it asks
// the client to run the handler and completes when the client answers.
func (cc *clientConn) invoke(call *bus.Call, done bus.Done) {
	cc.mu.Lock()
	if cc.closed {
		cc.mu.Unlock()
		done(pmix.ErrLostConnectionToClient, nil)
		return
	}
	cc.seq++
	seq := cc.seq
	cc.pending[seq] = pendingInvoke{call: call, done: done}
	cc.grown = cc.grown || len(cc.pending) > 8
	batch := cc.version >= 2
	cc.mu.Unlock()
	inv := proto.Invoke{
		Seq: seq, ID: uint64(call.ID), Name: call.Name,
		Code: call.Code, Source: call.Source, Info: call.Info, Results: call.Results,
	}
	var err error
	if batch {
		// The event's info is the same for every client it goes to:
		// encoded once, copied into each client's frame.
		inv.Encoded = cc.a.infos.Get(call.Info)
		err = cc.w.sendInvoke(&inv)
	} else {
		err = cc.write(inv.Frame())
	}
	if err != nil {
		// The client was cut off or its socket broke: the sender closes
		// the connection, not the dispatch goroutine, which must not wait.
		if p, ok := cc.take(seq); ok {
			p.done(pmix.ErrLostConnectionToClient, nil)
		}
	}
}

func (cc *clientConn) take(seq uint64) (pendingInvoke, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	p, ok := cc.pending[seq]
	if !ok {
		return p, false
	}
	delete(cc.pending, seq)
	if cc.grown && len(cc.pending) == 0 && !cc.closed {
		cc.pending, cc.grown = make(map[uint64]pendingInvoke), false // what a burst grew is not kept per client
	}
	return p, true
}

// completed finishes the invocation a completion answers (an invoke-done
// frame, or an entry of an invoke-done-batch).
func (cc *clientConn) completed(f *proto.Done) {
	p, ok := cc.take(f.Seq)
	if !ok {
		cc.logger().Debug("completion for an invocation no longer pending", "seq", f.Seq)
		return
	}
	if f.HasPrior {
		if len(f.Prior) == len(p.call.Results) {
			copy(p.call.Results, f.Prior)
		} else {
			cc.logger().Warn("ignoring edited results of the wrong length", "handler", p.call.Name, "got", len(f.Prior), "want", len(p.call.Results))
		}
	}
	p.done(f.Status, f.Results)
}

// close drops the connection once: invocations in flight complete with
// PMIX_ERR_LOST_CONNECTION_TO_CLIENT so their chains move on, the registry
// closes and the subscriptions it needed are released. A non-nil why is
// sent to the client first.
func (cc *clientConn) close(why error) {
	cc.once.Do(func() {
		if why != nil {
			cc.fail(why)
		}
		cc.win.Close() // before the chains in flight end and start waiting ones
		cc.mu.Lock()
		cc.closed = true
		pending := cc.pending
		cc.pending = nil
		entry, reg := cc.entry, cc.reg
		cc.mu.Unlock()
		for _, p := range pending {
			p.done(pmix.ErrLostConnectionToClient, nil)
		}
		if reg != nil {
			reg.Close()
		}
		if entry != nil {
			cc.release(entry)
			if !cc.a.isClosed() { // Shutdown drops every subscription at once
				cc.a.router.Forget(cc)
			}
			cc.logger().Debug("client detached")
		}
		// What is queued goes out before the socket closes: a last reply,
		// or why a client that stopped reading was cut off, should it read
		// again within the write timeout. Shutdown does not wait for it.
		cc.w.finish(nil, cc.a.cfg.WriteTimeout)
		_ = cc.c.Close()
		cc.a.forget(cc)
	})
}

// Target is the client as the router sees it (router.Recipient).
func (cc *clientConn) Target() (pmix.Proc, string, *bus.Registry, bool) {
	e, reg, ok := cc.attached()
	if !ok {
		return pmix.Proc{}, "", nil, false
	}
	return e.proc, e.job.session, reg, true
}

func (cc *clientConn) Cork() { cc.w.cork() }

func (cc *clientConn) Uncork(direct bool) { cc.w.uncork(direct) }

func (cc *clientConn) Window() *router.Window { return cc.win }

// release detaches the connection from its client entry, once: at finalize
// before the reply, so that the identity is free (and its
// PMIX_PERSIST_PROC data gone) when the client's Finalize returns and the
// next process with it can attach at once; or when the connection closes.
func (cc *clientConn) release(e *clientEntry) {
	cc.released.Do(func() { cc.a.detach(e, cc) })
}

// attached reports the client's entry and registry, or false before hello
// or after close.
func (cc *clientConn) attached() (*clientEntry, *bus.Registry, bool) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.entry, cc.reg, !cc.closed && cc.reg != nil
}
