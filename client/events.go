package client

import (
	"context"
	"slices"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// RegisterEventHandler registers h for the given codes (none: a default
// handler) with the registration attributes in info (PMIX_EVENT_HDLR_NAME,
// the ordering keys, PMIX_RANGE and PMIX_EVENT_CUSTOM_RANGE as a source
// filter, affected procs, job/environment level, PMIX_EVENT_ACTION_TIMEOUT).
// It returns once the agent has recorded the registration and subscribed
// to what it needs, so an event notified afterwards reaches h.
//
// Errors: ErrEventRegistration for a duplicate name or impossible placement,
// ErrBadParam for a malformed attribute (the message says which);
// ErrLostConnection if the agent is gone.
func (c *Client) RegisterEventHandler(ctx context.Context, codes []pmix.Status, info []pmix.Info, h bus.Handler) (bus.ID, error) {
	if h == nil {
		return 0, pmix.Errorf(pmix.ErrBadParam, "nil event handler")
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	id, err := c.local.Register(codes, info, c.tracked(h))
	if err != nil {
		return 0, err
	}
	reg := registered{local: id, h: h, returned: make(chan struct{})}
	defer close(reg.returned)
	if _, err := c.requestRegistering(ctx, &proto.Frame{Type: proto.TypeRegister, Codes: nonNil(codes), Info: info}, &reg); err != nil {
		_ = c.local.Deregister(id)
		// If the call gave up waiting after the reply installed the
		// handler, drop it at the agent too (a reply still to come is
		// handled by the read loop).
		c.abandon(reg)
		return 0, err
	}
	c.replayModel(id, codes)
	return id, nil
}

func nonNil(codes []pmix.Status) []pmix.Status {
	if codes == nil {
		return []pmix.Status{}
	}
	return slices.Clone(codes)
}

// RegisterEventHandlerCB is the callback form of RegisterEventHandler: it
// returns at once and calls cb from another goroutine.
func (c *Client) RegisterEventHandlerCB(codes []pmix.Status, info []pmix.Info, h bus.Handler, cb func(bus.ID, error)) {
	c.async(func(ctx context.Context) { cb(c.RegisterEventHandler(ctx, codes, info, h)) })
}

// DeregisterEventHandler removes a registration.
//
// Errors: ErrNotFound for an id this client never returned or already
// removed; ErrLostConnection if the agent is gone (the handler is removed
// locally all the same).
func (c *Client) DeregisterEventHandler(ctx context.Context, id bus.ID) error {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if err := c.local.Deregister(id); err != nil {
		return err
	}
	c.mu.Lock()
	aid := c.toAgent[id]
	delete(c.toAgent, id)
	delete(c.handlers, aid)
	c.mu.Unlock()
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeDeregister, ID: aid})
	return err
}

// DeregisterEventHandlerCB is the callback form of DeregisterEventHandler.
func (c *Client) DeregisterEventHandlerCB(id bus.ID, cb func(error)) {
	c.async(func(ctx context.Context) { cb(c.DeregisterEventHandler(ctx, id)) })
}

// NotifyEvent notifies an event to the procs in rng. The agent stamps this
// process as the source. info may carry PMIX_EVENT_CUSTOM_RANGE (required
// for PMIX_RANGE_CUSTOM), PMIX_EVENT_AFFECTED_PROC(S),
// PMIX_EVENT_NON_DEFAULT, PMIX_EVENT_DO_NOT_CACHE and anything else for
// the handlers. A PMIX_RANGE_PROC_LOCAL event runs this process's own
// chain and never leaves it; NotifyEvent returns once that chain ended.
// The source receives its own event when the range includes it.
//
// pmix.EventAbortRequested (the minutes' PMIX_ABORT, -2904) notified by one
// of this process's handlers before it completes is the 2016-04-07
// minutes' abort request, which must wait for the chain to end. With
// PMIX_RANGE_PROC_LOCAL, NotifyEvent returns at once and the handler's
// results carry pmix.KeyEventAbortRequested, so the registry running its
// chain raises the abort event (from this process, PROC_LOCAL, with a text
// of its own; info is not used) once the chain has ended. Several handlers
// of concurrent chains running then each raise it. With a wider range the
// event goes out as any other, and the agent holds this process's own copy
// until its chains running then have ended.
//
// Errors: ErrBadParam for an invalid range or a CUSTOM range without
// targets; ErrLostConnection; ErrUnreach if the agent could not publish.
func (c *Client) NotifyEvent(ctx context.Context, code pmix.Status, rng pmix.Range, info []pmix.Info) error {
	if rng == pmix.RangeProcLocal {
		if code == pmix.EventAbortRequested && c.deferAbort() {
			return nil
		}
		done := make(chan struct{})
		c.local.Notify(bus.Event{Code: code, Source: c.self, Range: rng, Info: info}, func(bus.Outcome) { close(done) })
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return pmix.Errorf(pmix.ErrTimeout, "local chain for %v: %w", code, ctx.Err())
		}
	}
	if !rng.Valid() {
		return pmix.Errorf(pmix.ErrBadParam, "invalid range %v", rng)
	}
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeNotify, Code: code, Range: rng, Info: info})
	return err
}

// NotifyEventCB is the callback form of NotifyEvent. The event is sent
// before NotifyEventCB returns, so events notified one after another go
// out in that order, and an event notified from inside a handler leaves
// ahead of that handler's completion instead of behind it; only the wait
// for the agent's answer (and cb) happen on another goroutine.
func (c *Client) NotifyEventCB(code pmix.Status, rng pmix.Range, info []pmix.Info, cb func(error)) {
	if rng == pmix.RangeProcLocal || !rng.Valid() {
		c.async(func(ctx context.Context) { cb(c.NotifyEvent(ctx, code, rng, info)) })
		return
	}
	f := &proto.Frame{Type: proto.TypeNotify, Code: code, Range: rng, Info: info}
	ch, err := c.send(f, nil)
	c.async(func(ctx context.Context) {
		if err == nil {
			_, err = c.await(ctx, f, ch)
		}
		cb(err)
	})
}

// abandon removes a registration whose call gave up before the agent
// answered: if the agent's reply installed it meanwhile, it is deregistered
// at the agent too.
func (c *Client) abandon(reg registered) {
	c.mu.Lock()
	aid, ok := c.toAgent[reg.local]
	delete(c.toAgent, reg.local)
	if ok {
		delete(c.handlers, aid)
	}
	c.mu.Unlock()
	if ok {
		c.async(func(ctx context.Context) { _, _ = c.request(ctx, &proto.Frame{Type: proto.TypeDeregister, ID: aid}) })
	}
}

func (c *Client) async(f func(context.Context)) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		f(context.Background())
	}()
}

// invoke runs what the agent asked for in f: a handler (an invoke frame),
// several in order (an invoke-batch), or a pull's data.
func (c *Client) invoke(f *proto.Frame) {
	switch f.Type {
	case proto.TypeIOFData:
		c.iofData(f) // iof.go
	case proto.TypeInvokeBatch:
		for i := range f.Invokes {
			c.invokeOne(&f.Invokes[i])
		}
	default:
		inv := proto.InvokeOf(f)
		c.invokeOne(&inv)
	}
}

// invokeOne runs a handler the agent asked for and answers with its
// status, its results and the prior results as it left them.
func (c *Client) invokeOne(inv *proto.Invoke) {
	c.mu.Lock()
	reg, ok := c.handlers[inv.ID]
	c.mu.Unlock()
	if !ok {
		// Deregistered while the agent was invoking it.
		c.answer(inv.Seq, pmix.EventNoActionTaken, nil, nil)
		return
	}
	<-reg.returned // a replayed event waits for the registration call to return
	// One allocation holds what the invocation needs until it completes
	// (and one more its done): a delivery is the fan-out's unit of work.
	d := &delivery{c: c, seq: inv.Seq}
	d.call = bus.Call{ID: reg.local, Name: inv.Name, Code: inv.Code, Source: inv.Source, Info: inv.Info, Results: inv.Results}
	if d.call.Results == nil {
		d.call.Results = []pmix.Info{}
	} else {
		d.prior = slices.Clone(d.call.Results)
	}
	c.begin(&d.run, reg.local)
	reg.h(&d.call, d.complete)
}

// delivery is one invocation of a handler by the agent, from the call to
// its completion.
type delivery struct {
	c    *Client
	seq  uint64
	call bus.Call
	run  invocation
	// prior is the prior results as the agent sent them, to tell whether
	// the handler edited them: only edited ones go back.
	prior []pmix.Info
}

// complete is the handler's done.
func (d *delivery) complete(status pmix.Status, results []pmix.Info) {
	if d.run.completed.Swap(true) {
		return
	}
	d.c.answer(d.seq, status, d.c.settle(&d.run, results), d.edited())
}

// edited returns the prior results if the handler changed them, else nil:
// the agent keeps them as they were when a completion carries none, so a
// chain of n handlers does not send every result back n times.
func (d *delivery) edited() []pmix.Info {
	if pmix.InfosEqual(d.call.Results, d.prior) {
		return nil
	}
	return d.call.Results
}

// answer sends the completion of invocation seq: prior is the prior
// results as the handler left them, nil if it never saw them or left them
// as they were.
func (c *Client) answer(seq uint64, status pmix.Status, results, prior []pmix.Info) {
	d := proto.Done{Seq: seq, Status: status, Results: results, Prior: prior, HasPrior: prior != nil}
	if c.batch {
		_ = c.w.WriteDone(&d)
		return
	}
	_ = c.write(d.Frame())
}
