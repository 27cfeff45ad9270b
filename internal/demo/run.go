package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/agent/agenttest"
	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// demoWait bounds each wait of the demo for something to happen.
const demoWait = 15 * time.Second

// closeTimeout bounds the shutdown of the world at the end.
const closeTimeout = 30 * time.Second

// Config configures a run of the demo.
type Config struct {
	// Out receives the trace.
	Out io.Writer
	// Logger receives the servers' and agents' logs; nil discards them.
	Logger *slog.Logger
	// Client is the command line of one client process: the executable
	// and its arguments. The process runs RunClient; "pmixbus demo" gives
	// "pmixbus demo-client".
	Client []string
}

// ErrTraceDiffers: what the run did differs from what the declarations
// expect; the trace says how.
var ErrTraceDiffers = errors.New("the trace differs from what the declarations expect")

// Run runs the demo: it starts the clusters, agents and client processes,
// sends the events, writes the trace to cfg.Out, checks it against the
// declarations, and then runs the RFC0003 rendezvous. Everything it started
// — processes, servers, temp files — is gone when it returns, also on
// failure or when ctx ends.
//
// Errors: one wrapping ErrTraceDiffers; what failed to start or happen in
// time (wrapping ctx's error when ctx ended).
func Run(ctx context.Context, cfg Config) (err error) {
	if len(cfg.Client) == 0 {
		return errors.New("demo: no client command")
	}
	d := &demo{out: cfg.Out, log: cfg.Logger, client: cfg.Client, state: newDemoState(), start: time.Now()}
	// Deferred, so that even a panic stops the processes and servers and
	// removes the temp dir.
	defer func() {
		if cerr := d.close(); err == nil {
			err = cerr
		}
	}()
	return d.run(ctx)
}

// demo is one run of the demo.
type demo struct {
	out    io.Writer
	log    *slog.Logger
	client []string // command line of a client process
	start  time.Time

	w      *agenttest.World
	procs  map[string]*demoProc // by client key
	oracle *oracle
	state  *demoState

	seq    int // of commands to clients
	fences int
}

func (d *demo) printf(format string, a ...any) { fmt.Fprintf(d.out, format, a...) }

func (d *demo) run(ctx context.Context) error {
	var err error
	if d.oracle, err = newOracle(); err != nil {
		return fmt.Errorf("declarations: %w", err)
	}
	if d.w, err = agenttest.New(ctx, worldSpec(), "", d.log); err != nil {
		return err
	}
	if err := d.hookAgents(ctx); err != nil {
		return err
	}
	if err := d.startClients(ctx); err != nil {
		return err
	}
	// Once every subscription is known everywhere, an event published
	// anywhere reaches every agent that registered for it.
	wctx, cancel := context.WithTimeout(ctx, demoWait)
	err = d.w.WaitPropagation(wctx)
	cancel()
	if err != nil {
		return err
	}
	d.printHeader()
	d.printf("\nready after %v; sending the events\n", time.Since(d.start).Round(time.Millisecond))

	var diffs []string
	chains, calls := 0, 0
	for i, ev := range demoEvents {
		want, untaken, err := d.oracle.expect(ctx, ev)
		if err != nil {
			return err
		}
		d.printf("\n%d. %s\n", i+1, ev.title())
		if len(ev.info) > 0 {
			d.printf("   info: %s\n", pmix.FormatInfos(ev.info))
		}
		got, err := d.send(ctx, ev, want)
		if err != nil {
			return fmt.Errorf("event %d (%s): %w", i+1, ev.name, err)
		}
		diffs = append(diffs, d.report(ev, want, got)...)
		if len(untaken) > 0 {
			keys := make([]string, len(untaken))
			for i, c := range untaken {
				keys[i] = c.key()
			}
			d.printf("   (in range, but no handler takes it: %s)\n", strings.Join(keys, ", "))
		}
		chains += len(want)
		for _, w := range want {
			calls += len(w.outcome.Ran)
		}
	}
	if len(diffs) > 0 {
		d.printf("\nDIFFERENCES from what the declarations expect:\n")
		for _, s := range diffs {
			d.printf("  %s\n", s)
		}
		return fmt.Errorf("%w: %d differences", ErrTraceDiffers, len(diffs))
	}
	d.printf("\nOK: the trace matches the declarations: %d events, %d chains in %d processes, %d handler calls (%v in all)\n",
		len(demoEvents), chains, len(demoClients), calls, time.Since(d.start).Round(time.Millisecond))
	return d.rendezvous(ctx)
}

// hookAgents has every agent report its chains' outcomes to the state,
// and the host RM of each cluster, on its first node, take RM-range events.
func (d *demo) hookAgents(ctx context.Context) error {
	seen := map[string]bool{}
	for _, node := range d.w.Nodes() {
		a := d.w.Agent(node)
		a.OnOutcome(func(r event.OutcomeReport) { d.state.update(func() { d.state.outcomes = append(d.state.outcomes, r) }) })
		cid := nodeCluster(node)
		if seen[cid] {
			continue
		}
		seen[cid] = true
		err := a.OnRMEvent(ctx, func(m *event.Message) {
			d.state.update(func() { d.state.rm = append(d.state.rm, rmReceipt{cluster: cid, node: node, msg: m}) })
		})
		if err != nil {
			return fmt.Errorf("agent %s: %w", node, err)
		}
	}
	return nil
}

// startClients launches one process per demo client, as a host RM would,
// with the environment its agent issued, and waits until each has
// registered its handlers.
func (d *demo) startClients(ctx context.Context) error {
	d.procs = map[string]*demoProc{}
	for _, c := range demoClients {
		p, err := startDemoProc(d.client, c, d.w.Env(c.key()), d.state)
		if err != nil {
			return fmt.Errorf("launching client %s: %w", c.key(), err)
		}
		d.procs[c.key()] = p
	}
	return d.state.wait(ctx, 30*time.Second, func(s *demoState) error {
		for _, c := range demoClients {
			if err := s.exitedErr(c.key()); err != nil {
				return err
			}
			if !slices.ContainsFunc(s.lines[c.key()], func(l demoLine) bool { return l.Ev == "ready" }) {
				return fmt.Errorf("client %s is not ready", c.key())
			}
		}
		return nil
	}, d.procStderr)
}

func (d *demo) printHeader() {
	mc := d.w.MultiCluster()
	d.printf("pmixbus demo: clusters %s, joined by leaf nodes through hub %s\n", strings.Join(d.clusterNames(), " and "), mc.HubURL())
	for _, c := range mc.Clusters() {
		var nodes []string
		for _, n := range d.w.Nodes() {
			if nodeCluster(n) == string(c.ID()) {
				nodes = append(nodes, n)
			}
		}
		d.printf("  cluster %-5s NATS %s (JetStream domain %s), agents on %s\n", c.ID(), c.URL(), c.Domain(), strings.Join(nodes, ", "))
	}
	for _, j := range demoJobs {
		byNode := map[string][]string{}
		var order []string
		for r, n := range j.nodes {
			if _, ok := byNode[n]; !ok {
				order = append(order, n)
			}
			byNode[n] = append(byNode[n], fmt.Sprint(r))
		}
		var where []string
		for _, n := range order {
			where = append(where, fmt.Sprintf("rank %s on %s", strings.Join(byNode[n], ","), n))
		}
		d.printf("  job %s:%s (session %s): %s\n", j.cluster, j.nspace, j.session, strings.Join(where, ", "))
	}
	d.printf("\nclient processes and their handlers, in registration order:\n")
	for _, c := range demoClients {
		d.printf("  %s on %s/%s, pid %d (%s)\n", c.key(), c.cluster, c.node(), d.procs[c.key()].pid(), c.role)
		regs := d.oracle.regs[c.key()].Registrations()
		hs, _ := roleHandlers(c.role)
		for _, h := range hs {
			if h.name == fenceHandler.name {
				continue
			}
			i := slices.IndexFunc(regs, func(g bus.Registration) bool { return g.Name == h.name })
			if i < 0 {
				continue
			}
			ret := trace.Status(h.status)
			if len(h.results) > 0 {
				ret += " " + resultsString(h.results)
			}
			d.printf("      %-10s %-52s returns %s\n", h.name, describeRegistration(regs[i], h), ret)
		}
	}
}

func (d *demo) clusterNames() []string {
	var out []string
	for _, c := range d.w.MultiCluster().Clusters() {
		out = append(out, string(c.ID()))
	}
	return out
}

// resultsString shows infos a handler returns: "evterm=true!".
func resultsString(infos []pmix.Info) string {
	parts := make([]string, len(infos))
	for i, in := range infos {
		parts[i] = strings.TrimPrefix(in.String(), "pmix.")
	}
	return strings.Join(parts, " ")
}

// demoResult is what an event did: the chains the agents reported, the
// handlers each client process reported running, and RM receipts.
type demoResult struct {
	outcomes map[string]event.OutcomeReport // by client key
	ran      map[string][]demoLine          // by client key, this event's code only
	rm       []rmReceipt
}

// send sends ev and a fence after it from the same source, and waits until
// every client ran the fence, every expected chain was reported and every
// client process reported its handlers.
func (d *demo) send(ctx context.Context, ev demoEvent, want []expectedChain) (demoResult, error) {
	d.state.update(func() { d.state.mark = d.state.count() })
	fence := 0
	switch {
	case ev.rng == pmix.RangeProcLocal:
		// Never leaves the process: the client reports its own chain
		// before it reports the command done.
		if err := d.command(ctx, ev.fromClient, demoCommand{Event: ev.name}); err != nil {
			return demoResult{}, err
		}
	case ev.fromClient != "":
		if err := d.command(ctx, ev.fromClient, demoCommand{Event: ev.name}); err != nil {
			return demoResult{}, err
		}
		d.fences++
		fence = d.fences
		if err := d.command(ctx, ev.fromClient, demoCommand{Fence: fence}); err != nil {
			return demoResult{}, err
		}
	default:
		a := d.w.Agent(ev.fromRM)
		if _, err := a.Notify(ctx, ev.code, ev.rng, ev.env, ev.info); err != nil {
			return demoResult{}, fmt.Errorf("notify: %w", err)
		}
		d.fences++
		fence = d.fences
		if _, err := a.Notify(ctx, codeFence, pmix.RangeGlobal, false, fenceInfo(fence)); err != nil {
			return demoResult{}, fmt.Errorf("fence: %w", err)
		}
	}
	var res demoResult
	err := d.state.wait(ctx, demoWait, func(s *demoState) error {
		res = s.resultSince(ev.code)
		for _, c := range demoClients {
			if err := s.exitedErr(c.key()); err != nil {
				return err
			}
			if fence > 0 && !slices.ContainsFunc(s.lines[c.key()], func(l demoLine) bool { return l.Ev == "ran" && l.Fence == fence }) {
				return fmt.Errorf("client %s has not run fence %d yet", c.key(), fence)
			}
		}
		if ev.rng == pmix.RangeProcLocal {
			return nil // reported before the command was done
		}
		for _, w := range want {
			if _, ok := res.outcomes[w.client.key()]; !ok {
				return fmt.Errorf("no outcome yet from %s", w.client.key())
			}
		}
		// A process reports each handler before completing it, but its
		// lines may be read after its agent reported the chain.
		for k, o := range res.outcomes {
			if len(res.ran[k]) < len(o.Outcome.Ran) {
				return fmt.Errorf("client %s reported %d of the %d handlers its agent ran", k, len(res.ran[k]), len(o.Outcome.Ran))
			}
		}
		if ev.rng == pmix.RangeRM && !ev.env && len(res.rm) == 0 {
			return fmt.Errorf("the RM of %s has not received it", ev.source().Cluster)
		}
		return nil
	}, d.procStderr)
	return res, err
}

// command has a client process run cmd and waits until it is done.
func (d *demo) command(ctx context.Context, key string, cmd demoCommand) error {
	d.seq++
	cmd.Seq = d.seq
	if err := d.procs[key].send(cmd); err != nil {
		return fmt.Errorf("client %s: %w", key, err)
	}
	var done demoLine
	err := d.state.wait(ctx, demoWait, func(s *demoState) error {
		if err := s.exitedErr(key); err != nil {
			return err
		}
		i := slices.IndexFunc(s.lines[key], func(l demoLine) bool { return l.Ev == "notified" && l.Seq == cmd.Seq })
		if i < 0 {
			return fmt.Errorf("client %s has not done command %d", key, cmd.Seq)
		}
		done = s.lines[key][i]
		return nil
	}, d.procStderr)
	if err != nil {
		return err
	}
	if done.Err != "" {
		return fmt.Errorf("client %s: %s", key, done.Err)
	}
	return nil
}

// report prints what ev did and returns how it differs from want.
func (d *demo) report(ev demoEvent, want []expectedChain, got demoResult) []string {
	var diffs []string
	differ := func(format string, a ...any) {
		diffs = append(diffs, fmt.Sprintf("%s event: ", ev.name)+fmt.Sprintf(format, a...))
	}
	expected := map[string]expectedChain{}
	for _, w := range want {
		expected[w.client.key()] = w
	}
	for _, c := range demoClients {
		k := c.key()
		w, isWanted := expected[k]
		o, hasOutcome := got.outcomes[k]
		ran := got.ran[k]
		if !isWanted {
			if hasOutcome || len(ran) > 0 {
				d.printf("   %-18s UNEXPECTED: %s\n", c.cluster+"/"+c.node()+" "+c.proc.String(), ranString(ran))
				differ("%s ran handlers %s; the event should not have reached it", k, ranString(ran))
			}
			continue
		}
		where := c.cluster + "/" + c.node() + " " + c.proc.String()
		if ev.rng == pmix.RangeProcLocal {
			// No agent saw it: the client's own report is the trace.
			d.printf("   %-18s %s   (in-process, never published)\n", where, ranString(ran))
			if ranString(ran) != ranString(linesOf(w.outcome)) {
				differ("%s ran %s, want %s", k, ranString(ran), ranString(linesOf(w.outcome)))
			}
			continue
		}
		if !hasOutcome {
			differ("%s reported no chain, want %s", k, trace.Chain(w.outcome))
			continue
		}
		d.printf("   %-18s %s%s\n", where, trace.Chain(o.Outcome), resultsNote(o.Outcome))
		if o.Node != c.node() || o.Cluster != c.cluster {
			differ("%s's chain ran on %s/%s, want %s/%s", k, o.Cluster, o.Node, c.cluster, c.node())
		}
		if g, x := trace.Chain(o.Outcome), trace.Chain(w.outcome); g != x {
			differ("%s ran %s, want %s", k, g, x)
		} else if !pmix.InfosEqual(o.Outcome.Results, w.outcome.Results) {
			differ("%s's results are %s, want %s", k, pmix.FormatInfos(o.Outcome.Results), pmix.FormatInfos(w.outcome.Results))
		}
		if g, x := ranString(ran), ranString(linesOf(o.Outcome)); g != x {
			differ("%s's process reports running %s, its agent %s", k, g, x)
		}
		if wantSrc := trace.Proc(ev.busEvent(c).Source.Proc); len(ran) > 0 && ran[0].Source != wantSrc {
			differ("%s saw the source as %q, want %q", k, ran[0].Source, wantSrc)
		}
	}
	if len(want) == 0 && ev.rng != pmix.RangeRM {
		d.printf("   (no client chain)\n")
	}
	if ev.rng == pmix.RangeRM && !ev.env {
		src := ev.source()
		for _, r := range got.rm {
			d.printf("   RM of %-11s received it (agent %s's OnRMEvent) from %s\n", r.cluster, r.node, trace.Origin(r.msg.Source))
			if r.cluster != src.Cluster || r.msg.Source.Proc != src.Proc {
				differ("the RM of %s received it from %s, want only the RM of %s from %v", r.cluster, trace.Origin(r.msg.Source), src.Cluster, src.Proc)
			}
		}
		if len(got.rm) == 0 {
			differ("no RM received it")
		}
	}
	return diffs
}

// resultsNote lists the non-status results a chain collected.
func resultsNote(o bus.Outcome) string {
	var extra []pmix.Info
	names := map[string]bool{}
	for _, r := range o.Ran {
		names[r.Name] = true
	}
	for _, in := range o.Results {
		if !names[in.Key] {
			extra = append(extra, in)
		}
	}
	if len(extra) == 0 {
		return ""
	}
	return "   results: " + resultsString(extra)
}

func linesOf(o bus.Outcome) []demoLine {
	out := make([]demoLine, len(o.Ran))
	for i, r := range o.Ran {
		out[i] = demoLine{Ev: "ran", Code: int32(o.Code), Handler: r.Name, Status: int32(r.Status)}
	}
	return out
}

func ranString(ls []demoLine) string {
	parts := make([]string, len(ls))
	for i, l := range ls {
		parts[i] = l.Handler + ":" + trace.Status(pmix.Status(l.Status))
	}
	if len(parts) == 0 {
		return "no handler ran"
	}
	return strings.Join(parts, " > ")
}

// procStderr returns what the client processes wrote on stderr, for a
// failure report.
func (d *demo) procStderr() string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(d.procs)) {
		if s := d.procs[k].stderr.String(); s != "" {
			fmt.Fprintf(&b, "\n--- stderr of client %s:\n%s", k, s)
		}
	}
	return b.String()
}

// close stops the client processes, then the world, and says what went
// wrong doing so.
func (d *demo) close() error {
	var wg sync.WaitGroup
	for _, p := range d.procs {
		wg.Go(p.stop)
	}
	wg.Wait()
	var err error
	if d.w != nil {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		err = d.w.Close(ctx)
	}
	if d.oracle != nil {
		d.oracle.close()
	}
	return err
}

// rmReceipt is an RM-range event the host RM of a cluster received.
type rmReceipt struct {
	cluster, node string
	msg           *event.Message
}

// demoState gathers what the client processes print and what the agents
// report, and lets the demo wait for a condition on it.
type demoState struct {
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every update
	lines    map[string][]demoLine
	outcomes []event.OutcomeReport
	rm       []rmReceipt
	exited   map[string]error // how each process that is gone ended
	mark     demoMark         // where the current event's records begin
}

type demoMark struct {
	lines        map[string]int
	outcomes, rm int
}

func newDemoState() *demoState {
	return &demoState{changed: make(chan struct{}), lines: map[string][]demoLine{}, exited: map[string]error{}}
}

// update changes the state under its lock and wakes the waiters.
func (s *demoState) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
}

// wait returns once cond holds, checking it after every update; when
// timeout passes first it returns cond's last error, with extra() appended.
func (s *demoState) wait(ctx context.Context, timeout time.Duration, cond func(*demoState) error, extra func() string) error {
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		s.mu.Lock()
		err := cond(s)
		changed := s.changed
		s.mu.Unlock()
		if err == nil {
			return nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return fmt.Errorf("not after %v: %v%s", timeout, err, extra())
		case <-ctx.Done():
			return fmt.Errorf("%w: %v%s", context.Cause(ctx), err, extra())
		}
	}
}

// count records how much is in the state now. Call with s.mu held.
func (s *demoState) count() demoMark {
	m := demoMark{lines: map[string]int{}, outcomes: len(s.outcomes), rm: len(s.rm)}
	for k, ls := range s.lines {
		m.lines[k] = len(ls)
	}
	return m
}

// resultSince returns what arrived for code since the mark. Call with s.mu
// held.
func (s *demoState) resultSince(code pmix.Status) demoResult {
	r := demoResult{outcomes: map[string]event.OutcomeReport{}, ran: map[string][]demoLine{}}
	for _, o := range s.outcomes[s.mark.outcomes:] {
		if o.Outcome.Code == code {
			r.outcomes[o.Cluster+":"+o.Client.String()] = o
		}
	}
	for k, ls := range s.lines {
		for _, l := range ls[s.mark.lines[k]:] {
			if l.Ev == "ran" && pmix.Status(l.Code) == code {
				r.ran[k] = append(r.ran[k], l)
			}
		}
	}
	for _, m := range s.rm[s.mark.rm:] {
		if m.msg.Code == code {
			r.rm = append(r.rm, m)
		}
	}
	return r
}

// exitedErr reports a client process that is gone. Call with s.mu held.
func (s *demoState) exitedErr(key string) error {
	if err, gone := s.exited[key]; gone {
		return fmt.Errorf("client %s exited: %v", key, err)
	}
	return nil
}

// demoProc is a running client process.
type demoProc struct {
	key    string
	proc   *launch.Process
	mu     sync.Mutex // serializes writes to stdin
	stderr *tailBuffer
	exited chan struct{} // closed once the state knows
}

// startDemoProc launches command as client c's process with env, the
// environment its agent issued, and reports its lines and its end to
// state.
func startDemoProc(command []string, c demoClient, env map[string]string, state *demoState) (*demoProc, error) {
	p := &demoProc{key: c.key(), stderr: &tailBuffer{max: 64 << 10}, exited: make(chan struct{})}
	env = maps.Clone(env)
	env[RoleEnv] = c.role
	proc, err := launch.Start(launch.Command{
		Path:   command[0],
		Args:   command[1:],
		Env:    env,
		Stdin:  true,
		Stdout: &lineSplitter{line: p.line(state)},
		Stderr: p.stderr,
	})
	if err != nil {
		return nil, err
	}
	p.proc = proc
	go func() {
		exit, err := proc.Wait(context.Background())
		if err == nil {
			err = errors.New(exit.String())
		}
		state.update(func() { state.exited[p.key] = err })
		close(p.exited)
	}()
	return p, nil
}

// line returns what is done with each line the process prints.
func (p *demoProc) line(state *demoState) func([]byte) {
	return func(b []byte) {
		var l demoLine
		if err := json.Unmarshal(b, &l); err != nil {
			fmt.Fprintf(p.stderr, "(demo: unreadable line %q)\n", b)
			return
		}
		state.update(func() { state.lines[p.key] = append(state.lines[p.key], l) })
	}
}

func (p *demoProc) pid() int { return p.proc.Pid() }

func (p *demoProc) send(cmd demoCommand) error {
	b, err := json.Marshal(cmd)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	_, err = fmt.Fprintf(p.proc.Stdin(), "%s\n", b)
	return err
}

// stop ends the process: the end of its input has it finalize and exit;
// one that does not within a few seconds is killed.
func (p *demoProc) stop() {
	p.mu.Lock()
	_ = p.proc.Stdin().Close()
	p.mu.Unlock()
	select {
	case <-p.exited:
		return
	case <-time.After(5 * time.Second):
	}
	_ = p.proc.Kill()
	<-p.exited
}

// lineSplitter hands each whole line written to it, without its newline,
// to line. Writes come from one goroutine.
type lineSplitter struct {
	line    func([]byte)
	partial []byte
}

func (s *lineSplitter) Write(b []byte) (int, error) {
	n := len(b)
	for {
		i := slices.Index(b, '\n')
		if i < 0 {
			s.partial = append(s.partial, b...)
			return n, nil
		}
		s.line(append(s.partial, b[:i]...))
		s.partial = s.partial[:0]
		b = b[i+1:]
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
