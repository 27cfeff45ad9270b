package client

import (
	"context"
	"slices"
	"strings"
	"sync"

	iof "github.com/pmixbus/pmixbus/iof/record"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
)

// iofPulls are the client's PMIx_IOF_pull handlers, by the id the client
// gave each (the agent's iof-data frames name it).
type iofPulls struct {
	mu       sync.Mutex
	next     uint64
	handlers map[uint64]func(iof.Record)
}

// IOFPush delivers data to the standard input of targets, as PMIx_IOF_push:
// a WILDCARD rank is every process of its nspace ("cluster:nspace" for
// another cluster's); eof closes their stdin after data (nil data and eof:
// close only). It returns once every target's agent has queued the data;
// a target that does not read its input holds it back (flow control).
// Concurrent pushes of one client are delivered one after another, in no
// set order.
//
// Errors: pmix.ErrBadParam for no target or an invalid proc;
// pmix.ErrNotFound for a job or rank that does not run; an error of
// status PMIX_ERR_IOF_FAILURE (code launch.no_stdin) for a target whose
// stdin is not forwarded (not a --stdin target of its run);
// pmix.ErrIOFComplete when every target's stdin is closed;
// ErrLostConnection; pmix.ErrTimeout when ctx ends first.
func (c *Client) IOFPush(ctx context.Context, targets []pmix.Proc, data []byte, eof bool) error {
	if len(targets) == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "IOF push to no target")
	}
	for first := true; first || len(data) > 0; first = false {
		n := min(len(data), proto.MaxIOFPush)
		f := &proto.Frame{Type: proto.TypeIOFPush, Procs: targets, Payload: data[:n]}
		if eof && n == len(data) {
			f.Info = []pmix.Info{pmix.NewInfo(pmix.KeyIOFComplete, pmix.Bool(true))}
		}
		if _, err := c.request(ctx, f); err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

// IOFPull asks for the output of procs on channels (iof.STDOUT, STDERR,
// STDDIAG, or'ed), as PMIx_IOF_pull: handler gets each record, from the
// first the job wrote (a late pull misses nothing), once, in order per
// process and channel, the last of a channel with Complete set. A
// WILDCARD rank is every process of its nspace. Handlers run one at a
// time, on the goroutine that runs the client's event handlers. It
// returns the pull's id for IOFDeregister.
//
// Errors: pmix.ErrBadParam for no proc, an invalid one, no channel, or
// iof.STDIN; pmix.ErrUnreach when the job's cluster has no output stream;
// ErrLostConnection; pmix.ErrTimeout when ctx ends first.
func (c *Client) IOFPull(ctx context.Context, procs []pmix.Proc, channels iof.Channel, handler func(iof.Record)) (uint64, error) {
	if handler == nil {
		return 0, pmix.Errorf(pmix.ErrBadParam, "IOF pull without a handler")
	}
	p := &c.pulls
	p.mu.Lock()
	if p.handlers == nil {
		p.handlers = map[uint64]func(iof.Record){}
	}
	p.next++
	id := p.next
	p.handlers[id] = handler // before the request: records may follow its reply at once
	p.mu.Unlock()
	if _, err := c.request(ctx, &proto.Frame{Type: proto.TypeIOFPull, ID: id, Procs: slices.Clone(procs), Channels: uint16(channels)}); err != nil {
		p.mu.Lock()
		delete(p.handlers, id)
		p.mu.Unlock()
		return 0, err
	}
	return id, nil
}

// IOFDeregister ends a pull, as PMIx_IOF_deregister. Its handler is not
// called once IOFDeregister returns, but for a call in progress.
//
// Errors: pmix.ErrNotFound for an id not pulling; ErrLostConnection;
// pmix.ErrTimeout when ctx ends first.
func (c *Client) IOFDeregister(ctx context.Context, id uint64) error {
	c.pulls.mu.Lock()
	_, ok := c.pulls.handlers[id]
	delete(c.pulls.handlers, id)
	c.pulls.mu.Unlock()
	if !ok {
		return pmix.Errorf(pmix.ErrNotFound, "no IOF pull %d", id)
	}
	_, err := c.request(ctx, &proto.Frame{Type: proto.TypeIOFDeregister, ID: id})
	return err
}

// iofData hands an iof-data frame to its pull's handler.
func (c *Client) iofData(f *proto.Frame) {
	c.pulls.mu.Lock()
	h := c.pulls.handlers[f.ID]
	c.pulls.mu.Unlock()
	if h == nil {
		return // deregistered meanwhile
	}
	rec := iof.Record{Cluster: c.self.Cluster, Nspace: f.Source.Nspace, Rank: f.Source.Rank, Channel: iof.Channel(f.Channels),
		Seq: f.Seq, Data: f.Payload, Complete: pmix.Flag(f.Info, pmix.KeyIOFComplete)}
	if id, ns, ok := strings.Cut(rec.Nspace, ":"); ok { // cluster.Split, which brings NATS in
		rec.Cluster, rec.Nspace = id, ns
	}
	if v, ok := pmix.LookupValue(f.Info, pmix.KeyIOFTime); ok {
		if t, ok := v.Time(); ok {
			rec.Time = t
		}
	}
	h(rec)
}
