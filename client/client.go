package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// The environment a launched process finds (set by the agent's host, see
// agent.RegisterClient).
const (
	EnvNspace     = proto.EnvNspace
	EnvRank       = proto.EnvRank
	EnvAgent      = proto.EnvAgent
	EnvCredential = proto.EnvCredential
)

// Client is an attached process.
type Client struct {
	proc pmix.Proc
	info []pmix.Info // what the agent told us at attach
	self bus.Origin
	log  *slog.Logger
	conn net.Conn
	r    *proto.Reader
	w    *proto.Writer
	// batch: the agent speaks protocol version 2, so completions go in
	// invoke-done-batch frames. Set at hello.
	batch bool

	local   *bus.Registry // PROC_LOCAL and internal events
	invokes *queue        // the agent's invocations, run in arrival order

	regMu sync.Mutex // registrations go to both registries in one order

	kv putStore // PMIx_Put values (collective.go)

	pulls iofPulls // PMIx_IOF_pull handlers (iof.go)

	mu       sync.Mutex
	seq      uint64
	waiting  map[uint64]chan *proto.Frame
	handlers map[uint64]registered // by the agent's registration id
	// registering: registrations whose reply has not arrived, by request
	// sequence; the read loop installs them when it does. abandoned: those
	// whose call gave up first; the read loop deregisters them at the
	// agent if their reply says they were registered after all.
	registering map[uint64]registered
	abandoned   map[uint64]bool
	toAgent     map[bus.ID]uint64 // local id → agent id
	lost        error             // set when the connection ended
	final       bool
	// running: invocations of this process's handlers that have not
	// completed (abort.go).
	running invocations
	pruneAt int

	handlerTimeout time.Duration // the default of the local registry

	model []pmix.Info // the model declared at Init (model.go)

	wg      sync.WaitGroup
	stopped chan struct{}
}

type registered struct {
	local bus.ID
	h     bus.Handler
	// returned is closed once RegisterEventHandler has returned: the agent
	// may invoke a handler (replaying cached events) right behind the
	// reply, and RFC semantics (openpmix#1189) want the call to return
	// first.
	returned chan struct{}
}

type options struct {
	env            func(string) string
	logger         *slog.Logger
	handlerTimeout time.Duration
	model          []pmix.Info // WithInitInfo's model declaration
}

// Option adjusts Init.
type Option func(*options) error

// WithEnv takes the identity from a map instead of the process environment
// (tests, and hosts that launch threads rather than processes).
func WithEnv(env map[string]string) Option {
	return func(o *options) error {
		if env == nil {
			return fmt.Errorf("%w: nil environment", ErrInvalidOption)
		}
		o.env = func(k string) string { return env[k] }
		return nil
	}
}

// WithLogger sets the logger for the client's own problems.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) error {
		if l == nil {
			return fmt.Errorf("%w: nil logger", ErrInvalidOption)
		}
		o.logger = l
		return nil
	}
}

// WithHandlerTimeout sets how long a handler of the client's own chains
// (PROC_LOCAL and internal events) may take to complete when its
// registration gives no PMIX_EVENT_ACTION_TIMEOUT, before the chain passes
// it over. The default is bus.DefaultHandlerTimeout, the agent's default for
// the chains it runs; zero waits forever.
func WithHandlerTimeout(d time.Duration) Option {
	return func(o *options) error {
		if d < 0 {
			return fmt.Errorf("%w: negative handler timeout %v", ErrInvalidOption, d)
		}
		o.handlerTimeout = d
		return nil
	}
}

// Init attaches to the agent, as PMIx_Init does.
//
// Errors: pmix.ErrInit when the environment lacks the identity (the
// message names what is missing); pmix.ErrUnreach when the agent cannot be
// reached; pmix.ErrInvalidCred or pmix.ErrNoPermissions when the agent
// refuses the identity; ErrAlreadyAttached, at once, when another process
// holds it; ErrInvalidOption.
func Init(ctx context.Context, opts ...Option) (*Client, error) {
	o := options{env: os.Getenv, logger: slog.New(slog.DiscardHandler), handlerTimeout: bus.DefaultHandlerTimeout}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	var missing []string
	for _, k := range []string{EnvNspace, EnvRank, EnvAgent, EnvCredential} {
		if o.env(k) == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		return nil, pmix.Errorf(pmix.ErrInit, "not launched by a pmixbus agent: %s unset", strings.Join(missing, ", "))
	}
	rank, err := pmix.ParseRank(o.env(EnvRank))
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrInit, "%s: %v", EnvRank, err)
	}
	network, addr, err := proto.ParseAddr(o.env(EnvAgent))
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrInit, "%s=%q: want unix:/path or tcp:host:port", EnvAgent, o.env(EnvAgent))
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "attaching to the agent at %s: %w", o.env(EnvAgent), err)
	}
	c := &Client{
		proc:        pmix.Proc{Nspace: o.env(EnvNspace), Rank: rank},
		log:         o.logger,
		conn:        conn,
		waiting:     make(map[uint64]chan *proto.Frame),
		handlers:    make(map[uint64]registered),
		registering: make(map[uint64]registered),
		abandoned:   make(map[uint64]bool),
		toAgent:     make(map[bus.ID]uint64),
		pruneAt:     minPrune,
		stopped:     make(chan struct{}),

		handlerTimeout: o.handlerTimeout,
	}
	c.r, c.w = proto.NewReader(conn, proto.DefaultMaxFrame), proto.NewWriter(conn)
	if err := c.hello(ctx, o.env(EnvCredential)); err != nil {
		_ = conn.Close()
		return nil, err
	}
	local, err := bus.NewRegistry(bus.Config{Self: c.self, DefaultTimeout: c.handlerTimeout, Logger: c.log})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	c.local = local
	c.invokes = newQueue()
	c.wg.Add(2)
	go c.readLoop()
	go c.runHandlers()
	c.declareModel(o.model)
	return c, nil
}

// hello authenticates synchronously, before the read loop starts.
func (c *Client) hello(ctx context.Context, cred string) error {
	if dl, ok := ctx.Deadline(); ok {
		_ = c.conn.SetDeadline(dl)
		defer c.conn.SetDeadline(time.Time{})
	}
	if err := c.w.WriteFrame(&proto.Frame{Type: proto.TypeHello, Seq: 1, Version: proto.Version, Nspace: c.proc.Nspace, Rank: c.proc.Rank, Credential: cred}); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "sending hello: %w", err)
	}
	f, err := c.r.ReadFrame()
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "reading the agent's answer: %w", err)
	}
	if err := f.Err(); err != nil {
		return err
	}
	if f.Type != proto.TypeReply {
		return pmix.Errorf(pmix.ErrCommFailure, "agent answered hello with %v", f.Type)
	}
	// An agent of version 1 states none, and sends invoke frames only.
	c.batch = f.Version >= 2
	c.info = f.Info
	str := func(k string) string {
		if v, ok := pmix.LookupValue(f.Info, k); ok {
			s, _ := v.Str()
			return s
		}
		return ""
	}
	c.self = bus.Origin{Cluster: str(pmix.KeyClusterID), Node: str(pmix.KeyHostname), Session: str(pmix.KeySessionID), Proc: c.proc}
	c.seq = 1
	return nil
}

// Proc returns the client's own identity.
func (c *Client) Proc() pmix.Proc { return c.proc }

// Cluster returns the cluster the client runs in (PMIX_CLUSTER_ID).
func (c *Client) Cluster() string { return c.self.Cluster }

// Info returns what the agent gave at attach: cluster, node, session,
// nspace and rank, the job-level info of its job and its own proc-level
// info the agent computed from the job map (job size, local rank …), and
// the job-level info its host registered.
func (c *Client) Info() []pmix.Info { return c.info }

// Finalize detaches from the agent, as PMIx_Finalize does. Handlers still
// running are waited for until ctx ends. Finalize after the agent was lost
// only releases the client's resources. It is safe to call twice. When it
// returns nil, the agent has released the identity: another process may
// attach with it.
//
// Errors: pmix.ErrTimeout if ctx ends before the agent answers; ctx.Err()
// if it ends while handlers are still running. A lost agent is no error.
func (c *Client) Finalize(ctx context.Context) error {
	c.mu.Lock()
	already := c.final
	c.final = true
	lost := c.lost
	c.mu.Unlock()
	var err error
	if !already && lost == nil {
		_, err = c.request(ctx, &proto.Frame{Type: proto.TypeFinalize})
		if errors.Is(err, pmix.ErrLostConnection) {
			err = nil
		}
	}
	_ = c.conn.Close()
	waited := make(chan struct{})
	go func() { c.wg.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-ctx.Done():
		return ctx.Err()
	}
	c.local.Close()
	return err
}

// request sends a frame and waits for the reply with the same sequence.
func (c *Client) request(ctx context.Context, f *proto.Frame) (*proto.Frame, error) {
	return c.requestRegistering(ctx, f, nil)
}

// requestRegistering is request for a register frame: reg is installed by
// the read loop as soon as the agent's reply arrives.
func (c *Client) requestRegistering(ctx context.Context, f *proto.Frame, reg *registered) (*proto.Frame, error) {
	ch, err := c.send(f, reg)
	if err != nil {
		return nil, err
	}
	return c.await(ctx, f, ch)
}

// send writes a request frame now, numbered, and returns the channel its
// reply comes on (see await).
func (c *Client) send(f *proto.Frame, reg *registered) (chan *proto.Frame, error) {
	ch := make(chan *proto.Frame, 1)
	c.mu.Lock()
	if c.lost != nil {
		err := c.lost
		c.mu.Unlock()
		return nil, err
	}
	c.seq++
	f.Seq = c.seq
	c.waiting[f.Seq] = ch
	if reg != nil {
		c.registering[f.Seq] = *reg
	}
	c.mu.Unlock()
	err := c.write(f)
	if err == nil {
		// A handler may make a request while the answers of its batch are
		// corked (runHandlers): the request goes out now, or it would wait
		// for the uncork that waits for it.
		err = c.w.Flush()
	}
	if err != nil {
		c.forget(f.Seq)
		return nil, fmt.Errorf("%w: sending %v: %w", ErrLostConnection, f.Type, err)
	}
	return ch, nil
}

// await waits for the reply to f, sent by send.
func (c *Client) await(ctx context.Context, f *proto.Frame, ch chan *proto.Frame) (*proto.Frame, error) {
	select {
	case r, ok := <-ch:
		if !ok {
			return nil, c.lostErr()
		}
		return r, r.Err()
	case <-ctx.Done():
		c.forget(f.Seq)
		return nil, pmix.Errorf(pmix.ErrTimeout, "%v: %w", f.Type, ctx.Err())
	}
}

func (c *Client) forget(seq uint64) {
	c.mu.Lock()
	delete(c.waiting, seq)
	if _, ok := c.registering[seq]; ok {
		delete(c.registering, seq)
		c.abandoned[seq] = true
	}
	c.mu.Unlock()
}

func (c *Client) lostErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lost != nil {
		return c.lost
	}
	return ErrLostConnection
}

func (c *Client) write(f *proto.Frame) error { return c.w.WriteFrame(f) }

// readLoop dispatches the agent's frames until the connection ends.
func (c *Client) readLoop() {
	defer c.wg.Done()
	var why, garbled error
	for {
		f, err := c.r.ReadFrame()
		if err != nil {
			if undecodable(err) && inStep(err) {
				c.failedComm(err)
				continue
			}
			if undecodable(err) {
				garbled = err
			}
			if why == nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				why = err
			}
			break
		}
		switch f.Type {
		case proto.TypeReply:
			c.mu.Lock()
			ch := c.waiting[f.Seq]
			delete(c.waiting, f.Seq)
			if reg, ok := c.registering[f.Seq]; ok {
				delete(c.registering, f.Seq)
				if f.Status == pmix.Success {
					c.handlers[f.ID] = reg
					c.toAgent[reg.local] = f.ID
				}
			}
			abandoned := c.abandoned[f.Seq]
			delete(c.abandoned, f.Seq)
			c.mu.Unlock()
			if abandoned && f.Status == pmix.Success {
				id := f.ID
				c.async(func(ctx context.Context) { _, _ = c.request(ctx, &proto.Frame{Type: proto.TypeDeregister, ID: id}) })
			}
			if ch != nil {
				ch <- f
			}
		case proto.TypeInvoke, proto.TypeInvokeBatch, proto.TypeIOFData:
			c.invokes.push(f) // in order with the handlers, as on PMIx's progress thread
		case proto.TypeError:
			why = f.Err()
		default:
			c.log.Warn("ignoring unexpected frame from the agent", "type", f.Type.String())
		}
	}
	c.connectionEnded(why, garbled)
}

// connectionEnded fails the requests in flight and, unless the client
// finalized, raises PMIX_ERR_LOST_CONNECTION in its own handlers, after
// PMIX_ERR_COMM_FAILURE if a frame that could not be decoded (garbled)
// ended it.
func (c *Client) connectionEnded(why, garbled error) {
	msg := ErrLostConnection.Message
	if why != nil {
		msg += ": " + why.Error()
	}
	lost := pmix.NewCodedError(ErrLostConnection.Status, ErrLostConnection.Code, msg)
	c.mu.Lock()
	c.lost = lost
	waiting := c.waiting
	c.waiting = map[uint64]chan *proto.Frame{}
	final := c.final
	c.mu.Unlock()
	for _, ch := range waiting {
		close(ch)
	}
	_ = c.conn.Close()
	close(c.stopped)
	c.invokes.close()
	if final {
		return
	}
	if garbled != nil {
		c.local.Notify(c.commFailure(garbled), nil)
	}
	c.log.Warn(msg)
	c.local.Notify(c.internalEvent(pmix.LostServerConnection, msg), nil)
}

// Lost returns a channel closed when the connection to the agent ends.
func (c *Client) Lost() <-chan struct{} { return c.stopped }
