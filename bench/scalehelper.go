package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// The scale benchmark runs two helper processes, one for the NATS server
// and one for the clients, so that the memory of each of the three is
// measured apart. It talks to them in JSON lines: requests on a helper's
// standard input, one reply each on its standard output, where
// "delivered" also comes, unasked, once an armed event has reached every
// client. The end of the input makes a helper finalize its clients, stop
// its server and exit.
const (
	opBase      = "base"      // reply only, first: the helper's memory before anything
	opNATS      = "nats"      // start a NATS server; the reply has its URL and the memory after
	opAttach    = "attach"    // attach Envs, each registering a handler for Code
	opMemory    = "memory"    // measure the memory
	opProfile   = "profile"   // write a heap profile to Path
	opCPU       = "cpu"       // profile the CPU into Path until the next opCPU; an empty Path stops
	opArm       = "arm"       // count handler invocations from zero, until each client's ran Events times
	opDelivered = "delivered" // reply only: every client's handler ran as often as armed for
)

type scaleRequest struct {
	Op     string              `json:"op"`
	Envs   []map[string]string `json:"envs,omitempty"`
	Code   pmix.Status         `json:"code,omitempty"`
	Path   string              `json:"path,omitempty"`
	Events int                 `json:"events,omitempty"`
}

type scaleReply struct {
	Op     string      `json:"op"`
	Err    string      `json:"err,omitempty"`
	Memory memoryStats `json:"memory"`
	URL    string      `json:"url,omitempty"`
	// delivered: when the first and the last handler ran, Unix
	// nanoseconds.
	First int64 `json:"first,omitempty"`
	Last  int64 `json:"last,omitempty"`
}

// ScaleHelperCommand is the argument that makes a pmixbus executable, or
// a test binary of a package running the scale benchmark, a helper
// process: "pmixbus bench-scale-helper" runs ScaleHelper.
const ScaleHelperCommand = "bench-scale-helper"

// attachParallel bounds the clients attaching at once: enough to keep both
// processes busy, well under the agent's MaxPendingHello.
const attachParallel = 32

// ScaleHelper is a helper process of the scale benchmark: it runs the
// NATS server or attaches the clients, in this process, and reports its
// memory and when the clients' handlers ran, as the scale benchmark asks
// on in and reads on out. It returns at the end of in, once its clients
// have finalized and its server stopped.
func ScaleHelper(ctx context.Context, in io.Reader, out io.Writer) error {
	s := &scaleClients{enc: json.NewEncoder(out)}
	if err := s.send(scaleReply{Op: opBase, Memory: measureMemory()}); err != nil {
		return err
	}
	defer s.finalize()
	stopCPU := func() {}
	defer func() { stopCPU() }()
	dec := json.NewDecoder(bufio.NewReader(in))
	for {
		var req scaleRequest
		if err := dec.Decode(&req); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading a request: %w", err)
		}
		rep := scaleReply{Op: req.Op}
		var err error
		switch req.Op {
		case opNATS:
			rep.URL, err = s.startNATS(ctx)
			rep.Memory = measureMemory()
		case opAttach:
			err = s.attach(ctx, req.Envs, req.Code)
			rep.Memory = measureMemory()
		case opMemory:
			rep.Memory = measureMemory()
		case opProfile:
			err = writeHeapProfile(req.Path)
		case opCPU:
			stopCPU()
			if req.Path != "" {
				stopCPU, err = startCPUProfileAt(req.Path)
			}
		case opArm:
			s.arm(max(req.Events, 1))
		default:
			err = fmt.Errorf("unknown request %q", req.Op)
		}
		if err != nil {
			rep.Err = err.Error()
		}
		if err := s.send(rep); err != nil {
			return err
		}
	}
}

type scaleClients struct {
	encMu sync.Mutex
	enc   *json.Encoder

	mu      sync.Mutex
	clients []*client.Client
	nats    *cluster.Cluster
	dir     string // the server's store

	// Handler invocations since arm, and when the first ran.
	want  atomic.Int64
	count atomic.Int64
	first atomic.Int64
}

func (s *scaleClients) send(rep scaleReply) error {
	s.encMu.Lock()
	defer s.encMu.Unlock()
	return s.enc.Encode(rep)
}

func (s *scaleClients) startNATS(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nats != nil {
		return "", errors.New("a server runs already")
	}
	dir, err := os.MkdirTemp("", "pxscale")
	if err != nil {
		return "", err
	}
	c, err := cluster.StartCluster(ctx, cluster.DefaultClusterConfig(benchCluster, 1, dir))
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	s.nats, s.dir = c, dir
	return c.URL(), nil
}

func (s *scaleClients) attach(ctx context.Context, envs []map[string]string, code pmix.Status) error {
	s.mu.Lock()
	need := len(s.clients) + len(envs) + fileReserve
	s.mu.Unlock()
	if err := raiseFileLimit(uint64(need)); err != nil {
		return fmt.Errorf("%d clients: %w", need-fileReserve, err)
	}
	work := make(chan map[string]string)
	errs := make(chan error, attachParallel)
	var wg sync.WaitGroup
	for range attachParallel {
		wg.Go(func() {
			for env := range work {
				if err := s.attachOne(ctx, env, code); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, env := range envs {
		select {
		case work <- env:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	if err == nil {
		select {
		case err = <-errs:
		default:
		}
	}
	return err
}

func (s *scaleClients) attachOne(ctx context.Context, env map[string]string, code pmix.Status) error {
	c, err := client.Init(ctx, client.WithEnv(env))
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.clients = append(s.clients, c)
	s.mu.Unlock()
	_, err = c.RegisterEventHandler(ctx, []pmix.Status{code}, nil, s.handle)
	return err
}

func (s *scaleClients) arm(events int) {
	s.mu.Lock()
	n := len(s.clients)
	s.mu.Unlock()
	s.count.Store(0)
	s.first.Store(0)
	s.want.Store(int64(n * events))
}

func (s *scaleClients) handle(_ *bus.Call, done bus.Done) {
	now := time.Now().UnixNano()
	done(pmix.EventNoActionTaken, nil)
	n := s.count.Add(1)
	if n == 1 {
		s.first.Store(now)
	}
	if n == s.want.Load() {
		_ = s.send(scaleReply{Op: opDelivered, First: s.first.Load(), Last: now})
	}
}

// finalize finalizes the clients, then stops the server.
func (s *scaleClients) finalize() {
	s.mu.Lock()
	clients, nats, dir := s.clients, s.nats, s.dir
	s.clients, s.nats = nil, nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if nats != nil {
		defer func() {
			_ = nats.Shutdown(ctx)
			_ = os.RemoveAll(dir)
		}()
	}
	work := make(chan *client.Client)
	var wg sync.WaitGroup
	for range attachParallel {
		wg.Go(func() {
			for c := range work {
				_ = c.Finalize(ctx)
			}
		})
	}
	for _, c := range clients {
		work <- c
	}
	close(work)
	wg.Wait()
}

// scaleHelper is a helper process, seen from the benchmark.
type scaleHelper struct {
	cmd     *exec.Cmd
	in      io.WriteCloser
	enc     *json.Encoder
	replies chan scaleReply
	base    memoryStats
	readErr error // set before replies closes
}

// startScaleHelper starts a helper process and reads its first reply.
func startScaleHelper(ctx context.Context, command []string) (*scaleHelper, error) {
	cmd := exec.Command(command[0], command[1:]...)
	h := &scaleHelper{cmd: cmd, replies: make(chan scaleReply, 16)}
	cmd.Stderr = os.Stderr // what a helper says when it fails
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the helper process %v: %w", command, err)
	}
	h.in, h.enc = in, json.NewEncoder(in)
	go func() {
		defer close(h.replies)
		dec := json.NewDecoder(bufio.NewReader(out))
		for {
			var rep scaleReply
			if err := dec.Decode(&rep); err != nil {
				if !errors.Is(err, io.EOF) {
					h.readErr = err
				}
				return
			}
			h.replies <- rep
		}
	}()
	rep, err := h.next(ctx, opBase, time.Minute)
	if err != nil {
		h.close()
		return nil, err
	}
	h.base = rep.Memory
	return h, nil
}

// call sends req and waits up to timeout for its reply.
func (h *scaleHelper) call(ctx context.Context, req scaleRequest, timeout time.Duration) (scaleReply, error) {
	if err := h.enc.Encode(req); err != nil {
		return scaleReply{}, fmt.Errorf("helper process: %w", err)
	}
	return h.next(ctx, req.Op, timeout)
}

// next waits up to timeout for the next reply, which must be op's.
func (h *scaleHelper) next(ctx context.Context, op string, timeout time.Duration) (scaleReply, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case rep, ok := <-h.replies:
		switch {
		case !ok:
			return rep, fmt.Errorf("helper process ended (%v); its error output is above", h.readErr)
		case rep.Err != "":
			return rep, fmt.Errorf("helper process: %s: %s", rep.Op, rep.Err)
		case rep.Op != op:
			return rep, fmt.Errorf("helper process answered %q, want %q", rep.Op, op)
		}
		return rep, nil
	case <-t.C:
		return scaleReply{}, fmt.Errorf("helper process: no %q within %v", op, timeout)
	case <-ctx.Done():
		return scaleReply{}, ctx.Err()
	}
}

// close ends the input, which finalizes the clients, and waits a minute
// for the process before killing it.
func (h *scaleHelper) close() {
	_ = h.in.Close()
	done := make(chan struct{})
	go func() {
		for range h.replies { // unblock the reader
		}
		_ = h.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		_ = h.cmd.Process.Kill()
		<-done
	}
}
