package launch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-multierror"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
)

// JobSpec is one app context of a run (one job, its own nspace, in one
// cluster): "-n 2 --cluster east ./a".
type JobSpec struct {
	// Cluster runs the job; empty means the cluster of the server the
	// launcher is connected to.
	Cluster cluster.ID
	// N is the number of ranks.
	N int
	// Hosts restricts placement to these nodes, with these slots
	// (--host, --hostfile; 0 slots: as many as the node's agent has);
	// empty places over the cluster's live agents by their slots.
	Hosts         []Node
	MapBy         string
	Oversubscribe bool
	// Nspace is the job's nspace; empty picks a unique one.
	Nspace  string
	Session string
	App     App
	// Info is more job-level info for the job's clients.
	Info []pmix.Info
}

// Config configures a run.
type Config struct {
	// Conn is the launcher's NATS connection, owned by the caller: to any
	// server linked to the jobs' clusters, signed in with the launcher
	// key on a secured deployment. Required.
	Conn *nats.Conn
	// Jobs are the run's app contexts; at least one.
	Jobs []JobSpec
	// Continuous keeps the jobs running when a process ends abnormally
	// (events only); otherwise the first abnormal end aborts the run.
	Continuous bool
	// NotifyTermination raises PMIX_EVENT_PROC_TERMINATED for normal
	// exits too.
	NotifyTermination bool
	// Stdout and Stderr receive the processes' output, whole lines, unless
	// Display is set; Stderr also receives the warnings about a whole job
	// (an output limit reached) either way. Nil discards.
	Stdout, Stderr io.Writer
	// Display, if set, renders the output instead (pmixbus run --output:
	// tags, XML, JSON, files; package iof).
	Display *iof.Display
	// Help, if set, shows the processes' help messages once per (file,
	// topic) with a count of the duplicates, across every job of the run;
	// nil shows each as it comes.
	Help *iof.Aggregator
	// Output is how the agents capture the output: raw, and the limit
	// per channel of each job.
	Output OutputSpec
	// Stdin is what the ranks read as standard input (--stdin); the zero
	// value forwards none (runstdin.go).
	Stdin Stdin
	// Started, if set, is called with the run once every rank has started
	// and before any of its output or ends is handled.
	Started func(*Run)
	// Version must be the agents'. Empty means liveness.ModuleVersion().
	Version string
	// Launcher names this launcher in the jobs' records (host:pid by
	// default).
	Launcher string
	// SpawnTimeout bounds each agent's answer to a spawn. Zero means 30 s.
	SpawnTimeout time.Duration
	// JobTTL is the TTL of the jobs' keys, refreshed every Beat: once the
	// launcher is gone, the agents notice within JobTTL and end the jobs'
	// processes LauncherGrace later. Zero means the defaults.
	JobTTL, Beat, LauncherGrace time.Duration
	// Poll is how often the launcher asks the jobs' agents about ranks
	// whose end it has not heard of (an agent that died, a lost report).
	// Zero means 1 s.
	Poll   time.Duration
	Logger *slog.Logger
}

// Result is how a run ended.
type Result struct {
	// ExitCode is what `pmixbus run` exits with, as mpirun: 0 when every
	// rank exited 0; else the first failing rank's exit code (128+signal
	// for a signal; 1 when it ended abnormally with code 0).
	ExitCode int
	// First is the first abnormal end, nil if none.
	First *ProcEnd
	// Canceled is set when Terminate ended the run.
	Canceled bool
	// Lost is set when the launcher's connection closed before every rank
	// ended: the agents end the jobs' processes once their keys expire
	// and the launcher grace passes; their ends are not known here.
	Lost bool
	// NodeLost is set when First is a rank that went down with its node
	// (its agent stopped answering and its liveness key expired).
	NodeLost bool
	Jobs     []JobResult
}

// JobResult is one job of a run.
type JobResult struct {
	Cluster cluster.ID
	Nspace  string
	// Status is the job's PMIX_JOB_TERM_STATUS.
	Status pmix.Status
	Ends   []ProcEnd // by rank
}

// Run is a launched run.
type Run struct {
	cfg  Config
	log  *slog.Logger
	jobs []*runJob
	subs []*nats.Subscription
	msgs chan *nats.Msg

	// output (output.go); recs, repairs, out and reconnects are the
	// follow loop's
	recs       chan incoming
	repairs    map[*runJob]*repairState
	out        outputState
	reconnects uint64
	// poll's: nodes found down and when first, and the reconnects seen
	suspects       map[string]time.Time
	pollReconnects uint64
	completes      map[rankKey]int // channels of a rank whose end was shown
	held           map[rankKey]heldEnd
	downRanks      map[rankKey]bool // ranks that went down with their node

	mu       sync.Mutex
	left     int
	first    *ProcEnd
	aborting bool
	canceled bool
	lost     bool
	stop     chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup
	result   Result
}

type runJob struct {
	spec    JobSpec
	cluster cluster.ID
	nspace  string
	places  []Placement
	nodes   []string
	ends    map[pmix.Rank]ProcEnd
	pids    map[pmix.Rank]int // from the agents' spawn replies; set before Launch returns
	rec     JobRecord
	js      natsjs.JetStream
	kv      natsjs.KeyValue
	claimed bool
	ended   bool
}

// Launch places and starts every job of cfg through the agents of their
// clusters, and returns once every rank has started. The caller waits
// with Wait, and ends the run early with Terminate.
//
// Errors: pmix.ErrBadParam for a bad config; ErrPlacement; ErrNspaceTaken;
// a *multierror.Error with one error per agent that failed to spawn
// (ErrNoProgram, ErrStart, ErrVersion, ErrNoAgent …) — nothing is left
// running or registered then; ctx.Err().
func Launch(ctx context.Context, cfg Config) (*Run, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &Run{cfg: cfg, log: cfg.Logger, msgs: make(chan *nats.Msg, 1<<16), stop: make(chan struct{}), done: make(chan struct{}),
		recs: make(chan incoming, 4096), repairs: map[*runJob]*repairState{}, completes: map[rankKey]int{}, held: map[rankKey]heldEnd{}, downRanks: map[rankKey]bool{},
		out: outputState{chans: map[chanKey]*chanState{}, seenJob: map[string]bool{}}, suspects: map[string]time.Time{}}
	r.reconnects = cfg.Conn.Stats().Reconnects
	r.pollReconnects = r.reconnects
	if err := r.plan(ctx); err != nil {
		return nil, err
	}
	if err := r.subscribe(); err != nil {
		r.release()
		return nil, err
	}
	if err := r.spawn(ctx); err != nil {
		r.release()
		return nil, err
	}
	if dests := r.stdinDests(); len(dests) > 0 {
		r.wg.Add(1)
		go r.pumpStdin(dests)
	}
	if cfg.Started != nil {
		cfg.Started(r)
	}
	r.wg.Add(2)
	go r.beat()
	go r.follow()
	return r, nil
}

func (c *Config) setDefaults() error {
	if c.Conn == nil {
		return pmix.Errorf(pmix.ErrBadParam, "launch: no NATS connection")
	}
	if len(c.Jobs) == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "launch: no job to run")
	}
	if c.Version == "" {
		c.Version = liveness.ModuleVersion()
	}
	if c.Launcher == "" {
		host, _ := os.Hostname()
		c.Launcher = fmt.Sprintf("%s:%d", host, os.Getpid())
	}
	if c.SpawnTimeout <= 0 {
		c.SpawnTimeout = 30 * time.Second
	}
	if c.JobTTL <= 0 {
		c.JobTTL = DefaultJobTTL
	}
	if c.Beat <= 0 {
		c.Beat = DefaultJobBeat
	}
	if c.LauncherGrace <= 0 {
		c.LauncherGrace = DefaultLauncherGrace
	}
	if c.Poll <= 0 {
		c.Poll = time.Second
	}
	if c.JobTTL < time.Second || c.Beat >= c.JobTTL {
		return pmix.Errorf(pmix.ErrBadParam, "launch: job key TTL %v must be at least 1s and more than the beat %v", c.JobTTL, c.Beat)
	}
	if c.Stdin.Reader != nil && c.Stdin.Rank != pmix.RankWildcard && int64(c.Stdin.Rank) >= int64(c.Jobs[0].N) {
		return pmix.Errorf(pmix.ErrBadParam, "launch: stdin to rank %d, but the first job has %d ranks", c.Stdin.Rank, c.Jobs[0].N)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// plan resolves each job's cluster, picks its nspace and places its
// ranks over the live agents, then claims the nspaces.
func (r *Run) plan(ctx context.Context) error {
	local := cluster.ID("")
	used := map[cluster.ID]map[string]int{} // slots this run already placed
	for i, spec := range r.cfg.Jobs {
		if spec.N <= 0 {
			return pmix.Errorf(pmix.ErrBadParam, "app context %d: -n must be at least 1, not %d", i+1, spec.N)
		}
		if spec.App.Path == "" {
			return pmix.Errorf(pmix.ErrBadParam, "app context %d: no program", i+1)
		}
		c := spec.Cluster
		if c == "" {
			if local == "" {
				var err error
				if local, err = LocalCluster(ctx, r.cfg.Conn); err != nil {
					return err
				}
			}
			c = local
		}
		if err := c.Validate(); err != nil {
			return err
		}
		entries, err := liveness.ReadAgents(ctx, r.cfg.Conn, c)
		if err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "reading the agents of cluster %s: %v", c, err)
		}
		live := map[string]*liveness.Record{}
		for _, e := range entries {
			if e.State == liveness.Up && e.Record != nil {
				live[e.Node] = e.Record
			}
		}
		if used[c] == nil {
			used[c] = map[string]int{}
		}
		var nodes []Node
		if len(spec.Hosts) > 0 {
			for _, h := range spec.Hosts {
				if live[h.Name] == nil {
					return fmt.Errorf("%w: unknown host %s: the live agents of cluster %s are %s", ErrPlacement, pmix.Quote(h.Name), c, strings.Join(slices.Sorted(maps.Keys(live)), ", "))
				}
				slots := h.Slots
				if slots == 0 {
					slots = live[h.Name].Slots // a hostfile entry without slots=: the agent's
				}
				nodes = append(nodes, Node{Name: h.Name, Slots: slots, Used: used[c][h.Name]})
			}
		} else {
			for _, name := range slices.Sorted(maps.Keys(live)) {
				rec := live[name]
				nodes = append(nodes, Node{Name: name, Slots: rec.Slots, Used: rec.Used + used[c][name]})
			}
		}
		places, err := Place(spec.N, nodes, spec.MapBy, spec.Oversubscribe)
		if err != nil {
			return fmt.Errorf("app context %d on cluster %s: %w", i+1, c, err)
		}
		nspace := spec.Nspace
		if nspace == "" {
			nspace = newNspace()
		}
		if slices.ContainsFunc(r.jobs, func(o *runJob) bool { return o.nspace == nspace }) {
			// A run tells its jobs' ranks, ends and output apart by nspace.
			return pmix.Errorf(pmix.ErrBadParam, "app context %d: nspace %s is another app context's too", i+1, pmix.Quote(nspace))
		}
		j := &runJob{spec: spec, cluster: c, nspace: nspace, places: places, ends: map[pmix.Rank]ProcEnd{}, pids: map[pmix.Rank]int{}}
		for _, p := range places {
			used[c][p.Node]++
			if !slices.Contains(j.nodes, p.Node) {
				j.nodes = append(j.nodes, p.Node)
			}
		}
		j.rec = JobRecord{Nspace: nspace, Launcher: r.cfg.Launcher, Started: time.Now(), Size: spec.N, Nodes: j.nodes, App: spec.App.Path}
		r.jobs = append(r.jobs, j)
		r.left += spec.N
	}
	for _, j := range r.jobs {
		js, kv, err := openJobs(ctx, r.cfg.Conn, j.cluster, 0)
		if err != nil {
			r.release()
			return err
		}
		j.js, j.kv = js, kv
		if err := claimJob(ctx, kv, j.rec, r.cfg.JobTTL); err != nil {
			r.release()
			return fmt.Errorf("cluster %s: %w", j.cluster, err)
		}
		j.claimed = true
		if j.spec.Nspace != "" {
			// Its output would mix with an earlier run's in pmixbus attach.
			if err := checkKeptOutput(ctx, js, j.cluster, j.nspace); err != nil {
				r.release()
				return err
			}
		}
	}
	return nil
}

// LocalCluster is the cluster of the server nc is connected to: its
// JetStream domain.
func LocalCluster(ctx context.Context, nc *nats.Conn) (cluster.ID, error) {
	js, err := natsjs.New(nc)
	if err != nil {
		return "", pmix.Errorf(pmix.ErrUnreach, "JetStream: %v", err)
	}
	ai, err := js.AccountInfo(ctx)
	if rerr := refused(nc, "$JS.API"); err != nil && rerr != nil {
		return "", rerr
	}
	if err != nil {
		return "", pmix.Errorf(pmix.ErrUnreach, "finding the local cluster (the JetStream domain of the server connected to): %v; name one with --cluster", err)
	}
	if ai.Domain == "" {
		return "", pmix.Errorf(pmix.ErrBadParam, "the server connected to has no JetStream domain, so no cluster; name one with --cluster")
	}
	return cluster.ID(ai.Domain), nil
}

func newNspace() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "job-" + hex.EncodeToString(b[:])
}

// subscribe listens for the jobs' process ends before any rank starts.
func (r *Run) subscribe() error {
	for _, j := range r.jobs {
		subj := StateSubject(j.cluster, j.nspace)
		sub, err := r.cfg.Conn.ChanSubscribe(subj, r.msgs)
		if err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %v", subj, err)
		}
		_ = sub.SetPendingLimits(-1, -1)
		r.subs = append(r.subs, sub)
	}
	if err := r.subscribeOutput(); err != nil {
		return err
	}
	if err := r.cfg.Conn.Flush(); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "subscribing: %v", err)
	}
	return nil
}

// spawn asks every agent of every job to start its ranks, all at once,
// and gathers every failure. On any, it ends what did start.
func (r *Run) spawn(ctx context.Context) error {
	var g multierror.Group
	var mu sync.Mutex
	started := map[*runJob][]string{}
	for i, j := range r.jobs {
		req := SpawnRequest{
			Version: r.cfg.Version, Nspace: j.nspace, Session: j.spec.Session, Launcher: r.cfg.Launcher,
			Map: j.places, App: j.spec.App, Continuous: r.cfg.Continuous, NotifyTermination: r.cfg.NotifyTermination,
			LauncherGraceMS: r.cfg.LauncherGrace.Milliseconds(), Output: r.cfg.Output, Stdin: r.cfg.stdinRank(i),
		}
		info := append(slices.Clone(j.spec.Info), pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(uint32(j.spec.N))))
		if r.cfg.Continuous {
			info = append(info, pmix.NewInfo(pmix.KeyJobRecoverable, pmix.Bool(true)), pmix.NewInfo(pmix.KeyJobContinuous, pmix.Bool(true)))
		}
		b, err := pmix.MarshalInfos(info)
		if err != nil {
			return pmix.Errorf(pmix.ErrBadParam, "job %s info: %v", j.nspace, err)
		}
		req.Info = b
		for _, node := range j.nodes {
			g.Go(func() error {
				ctx, cancel := context.WithTimeout(ctx, r.cfg.SpawnTimeout)
				defer cancel()
				var reply SpawnReply
				if err := Control(ctx, r.cfg.Conn, j.cluster, node, OpSpawn, req, &reply); err != nil {
					return fmt.Errorf("job %s, node %s of cluster %s: %w", j.nspace, node, j.cluster, err)
				}
				mu.Lock()
				started[j] = append(started[j], node)
				for rk, pid := range reply.Pids {
					if int(rk) < len(j.places) && j.places[rk].Node == node {
						j.pids[rk] = pid
					}
				}
				mu.Unlock()
				return nil
			})
		}
	}
	merr := g.Wait()
	if merr.ErrorOrNil() == nil {
		return nil
	}
	var cleanup multierror.Group
	for j, nodes := range started {
		for _, node := range nodes {
			cleanup.Go(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), r.cfg.SpawnTimeout)
				defer cancel()
				return Control(ctx, r.cfg.Conn, j.cluster, node, OpKill, KillRequest{Nspace: j.nspace, Force: true, Silent: true, Reason: "the launch failed elsewhere"}, nil)
			})
		}
	}
	if cerr := cleanup.Wait(); cerr.ErrorOrNil() != nil {
		r.log.Warn("ending the ranks of a failed launch", "err", cerr)
	}
	merr.ErrorFormat = formatErrors
	return merr
}

// formatErrors lists a launch's failures one per line.
func formatErrors(errs []error) string {
	if len(errs) == 1 {
		return errs[0].Error()
	}
	lines := make([]string, len(errs))
	for i, e := range errs {
		lines[i] = "  " + e.Error()
	}
	slices.Sort(lines)
	return fmt.Sprintf("%d agents failed:\n%s", len(errs), strings.Join(lines, "\n"))
}

// release deletes the claimed job keys and stops listening.
func (r *Run) release() {
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	for _, rs := range r.repairs {
		if rs.f != nil {
			rs.f.Stop()
		}
	}
	for _, j := range r.jobs {
		if j.claimed {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = j.kv.Delete(ctx, jobKey(j.nspace))
			cancel()
			j.claimed = false
		}
	}
}

// beat refreshes the jobs' keys until the run ends.
func (r *Run) beat() {
	defer r.wg.Done()
	t := time.NewTicker(r.cfg.Beat)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			return
		case <-t.C:
		}
		for _, j := range r.jobs {
			r.mu.Lock()
			live := j.claimed && !j.ended
			r.mu.Unlock()
			if !live {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Beat)
			if err := beatJob(ctx, j.js, j.cluster, j.rec, r.cfg.JobTTL); err != nil {
				r.log.Warn("refreshing a job's key failed", "nspace", j.nspace, "err", err)
			}
			cancel()
		}
	}
}

// follow handles the agents' reports until every rank has ended.
func (r *Run) follow() {
	defer r.wg.Done()
	poll := time.NewTicker(r.cfg.Poll)
	defer poll.Stop()
	for {
		select {
		case m := <-r.msgs:
			r.handle(m)
		case in := <-r.recs:
			r.record(in)
		case now := <-poll.C:
			r.checkOutput(now)
			if r.cfg.Help != nil {
				if err := r.cfg.Help.Tick(now); err != nil {
					r.log.Warn("writing the help message counts", "err", err)
				}
			}
			if r.cfg.Conn.IsClosed() {
				r.mu.Lock()
				r.lost = true
				r.left = 0
				r.mu.Unlock()
				break
			}
			r.poll()
		}
		r.mu.Lock()
		finished := r.left == 0
		r.mu.Unlock()
		if finished {
			r.finish()
			return
		}
	}
}

func (r *Run) handle(m *nats.Msg) {
	var end ProcEnd
	if err := decode(m.Data, &end); err != nil {
		r.log.Warn("a process end report that does not parse", "subject", m.Subject, "err", err)
		return
	}
	r.procEnd(end)
}

// Source is the node and pid of a rank of the run (--output
// tag-detailed); false for a process the run did not start.
func (r *Run) Source(nspace string, rank pmix.Rank) (node string, pid int, ok bool) {
	j := r.jobOf(nspace)
	if j == nil || int(rank) >= len(j.places) {
		return "", 0, false
	}
	pid, ok = j.pids[rank]
	return j.places[rank].Node, pid, ok
}

// JobSize is the number of ranks of one of the run's jobs, 0 for another
// nspace.
func (r *Run) JobSize(nspace string) int {
	for _, j := range r.jobs {
		if j.nspace == nspace {
			return j.spec.N
		}
	}
	return 0
}

// ended records one rank's end and applies the run's policy.
func (r *Run) ended(end ProcEnd) {
	r.mu.Lock()
	var j *runJob
	for _, jj := range r.jobs {
		if jj.nspace == end.Nspace && int(end.Rank) < len(jj.places) {
			j = jj
		}
	}
	if j == nil {
		r.mu.Unlock()
		return
	}
	if _, dup := j.ends[end.Rank]; dup {
		r.mu.Unlock()
		return
	}
	j.ends[end.Rank] = end
	r.left--
	abort := false
	if end.Abnormal() && r.first == nil {
		e := end
		r.first = &e
		abort = !r.cfg.Continuous && !r.aborting
		r.aborting = r.aborting || abort
	}
	jobDone := len(j.ends) == len(j.places)
	if jobDone {
		j.ended = true
	}
	r.mu.Unlock()
	if abort {
		r.log.Info("aborting the run", "nspace", end.Nspace, "rank", end.Rank, "node", end.Node, "why", end.Text)
		r.killAll(false, fmt.Sprintf("rank %d of %s %s", end.Rank, end.Nspace, end.Text))
	}
	if jobDone {
		r.jobEnded(j)
	}
}

// killAll asks every agent of every job to end its ranks, silently: the
// run is ending.
func (r *Run) killAll(force bool, reason string) {
	var g multierror.Group
	for _, j := range r.jobs {
		for _, node := range j.nodes {
			g.Go(func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				err := Control(ctx, r.cfg.Conn, j.cluster, node, OpKill, KillRequest{Nspace: j.nspace, Force: force, Silent: true, Reason: reason}, nil)
				if errors.Is(err, ErrUnknownJob) {
					return nil // its ranks have all ended
				}
				return err
			})
		}
	}
	if err := g.Wait().ErrorOrNil(); err != nil {
		r.log.Warn("ending the run's processes", "err", err)
	}
}

// poll asks the agents of ranks not heard of: an agent that is gone, whose
// key is no longer up, took its ranks with it (TERM_WO_SYNC, as the
// node-down events say); a rank its agent no longer runs ended without a
// report reaching us.
func (r *Run) poll() {
	for _, j := range r.jobs {
		r.mu.Lock()
		pending := map[string][]pmix.Rank{}
		for _, p := range j.places {
			if _, ok := j.ends[p.Rank]; !ok {
				pending[p.Node] = append(pending[p.Node], p.Rank)
			}
		}
		r.mu.Unlock()
		for node, ranks := range pending {
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Poll)
			var reply JobsReply
			err := Control(ctx, r.cfg.Conn, j.cluster, node, OpJobs, nil, &reply)
			cancel()
			if err != nil {
				// The clock starts at the first unanswered poll: a node
				// cut off is reported once it has not answered for the job
				// TTL and its key has expired meanwhile (the liveness TTL,
				// shorter), not a TTL after that.
				if errors.Is(err, ErrNoAgent) && r.downFor(j.cluster, node) >= r.cfg.JobTTL && r.nodeDown(j.cluster, node) {
					r.mu.Lock()
					for _, rk := range ranks {
						r.downRanks[rankKey{j.nspace, rk}] = true
					}
					r.mu.Unlock()
					for _, rk := range ranks {
						r.ended(ProcEnd{Nspace: j.nspace, Rank: rk, Node: node, State: pmix.ErrProcTermWOSync, ExitCode: 1, Text: "went down with its node (its agent stopped answering and its liveness key expired)"})
					}
				}
				continue
			}
			delete(r.suspects, cluster.Qualify(j.cluster, node))
			running := map[pmix.Rank]bool{}
			reported := map[pmix.Rank]ProcEnd{}
			for _, js := range reply.Jobs {
				if js.Nspace == j.nspace {
					for _, rs := range js.Ranks {
						running[rs.Rank] = true
					}
				}
			}
			for _, js := range append(reply.Jobs, reply.Finished...) {
				if js.Nspace != j.nspace {
					continue
				}
				for _, e := range js.Ends {
					if e.Nspace == j.nspace && e.Node == node {
						reported[e.Rank] = e
					}
				}
			}
			for _, rk := range ranks {
				if e, ok := reported[rk]; ok {
					r.procEnd(e) // its report did not reach us (the connection was down): the agent's copy
					continue
				}
				if !running[rk] {
					r.lateCheck(j, node, rk)
				}
			}
		}
	}
}

// lateCheck handles a rank its agent no longer lists: it counts as ended
// without a report only when none is acted on, held until the rank's
// output has ended (procEnd), or waiting in the channel.
func (r *Run) lateCheck(j *runJob, node string, rk pmix.Rank) {
	r.mu.Lock()
	_, seen := j.ends[rk]
	_, held := r.held[rankKey{j.nspace, rk}]
	r.mu.Unlock()
	if seen || held || len(r.msgs) > 0 {
		return
	}
	r.ended(ProcEnd{Nspace: j.nspace, Rank: rk, Node: node, State: pmix.ErrProcTermWOSync, ExitCode: 1, Text: "ended, but its agent's report never arrived"})
}

// downFor is how long node has been found down, unanswering, by polls
// since the launcher's connection last came back: a NATS server that
// restarts lets the agents' keys expire and their subscriptions lapse
// for a moment, which is no node going down (the agents wait a TTL after
// their own outage too).
func (r *Run) downFor(c cluster.ID, node string) time.Duration {
	if n := r.cfg.Conn.Stats().Reconnects; n != r.pollReconnects {
		r.pollReconnects = n
		clear(r.suspects)
	}
	k := cluster.Qualify(c, node)
	since, ok := r.suspects[k]
	if !ok {
		r.suspects[k] = time.Now()
		return 0
	}
	return time.Since(since)
}

func (r *Run) nodeDown(c cluster.ID, node string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Poll)
	defer cancel()
	entries, err := liveness.ReadAgents(ctx, r.cfg.Conn, c)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Node == node {
			return e.State != liveness.Up
		}
	}
	return true
}

// jobEnded raises the job's PMIX_EVENT_JOB_END and releases its key.
func (r *Run) jobEnded(j *runJob) {
	status, affected, code, text := r.jobStatus(j)
	info := []pmix.Info{
		pmix.NewInfo(pmix.KeyJobTermStatus, pmix.StatusValue(status)),
		pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(affected)),
	}
	if code > 0 && code <= 255 {
		info = append(info, pmix.NewInfo(pmix.KeyExitCode, pmix.Int32(int32(code))))
	}
	info = append(info,
		pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true)),
		pmix.NewInfo(pmix.KeyNspace, pmix.String(j.nspace)),
		pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String(text)),
	)
	m := &event.Message{
		ID:     "jobend." + string(j.cluster) + "." + j.nspace + "." + j.rec.Started.Format(time.RFC3339Nano),
		Code:   pmix.EventJobEnd,
		Range:  pmix.RangeNamespace,
		Source: bus.Origin{Cluster: string(j.cluster)},
		Info:   info,
		Time:   time.Now(),
	}
	scopes, err := event.Scopes(event.Place{Cluster: j.cluster}, m, nil, nil)
	if err == nil {
		err = event.Publish(r.cfg.Conn, m, scopes)
	}
	if err != nil {
		r.log.Warn("raising the job's end", "nspace", j.nspace, "err", err)
	}
	r.mu.Lock()
	claimed := j.claimed
	j.claimed = false
	r.mu.Unlock()
	if claimed {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if err := j.kv.Delete(ctx, jobKey(j.nspace)); err != nil {
			r.log.Warn("deleting the job's key", "nspace", j.nspace, "err", err)
		}
		cancel()
	}
}

// jobStatus is how job j ended: its PMIX_JOB_TERM_STATUS, the proc the
// end is about (its first abnormal rank, else the whole job), its exit
// code and a text.
func (r *Run) jobStatus(j *runJob) (pmix.Status, pmix.Proc, int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The run's first failure if it is this job's, else its lowest
	// failing rank.
	var first *ProcEnd
	if r.first != nil && r.first.Nspace == j.nspace {
		first = r.first
	}
	for _, rk := range slices.Sorted(maps.Keys(j.ends)) {
		if e := j.ends[rk]; first == nil && e.Abnormal() {
			first = &e
		}
	}
	if first == nil {
		if r.canceled {
			return pmix.ErrJobCanceled, pmix.Proc{Nspace: j.nspace, Rank: pmix.RankWildcard}, 0, "canceled"
		}
		return pmix.Success, pmix.Proc{Nspace: j.nspace, Rank: pmix.RankWildcard}, 0, "every rank exited normally"
	}
	st := pmix.ErrJobAborted
	switch first.State {
	case pmix.ErrProcTermWOSync:
		st = pmix.ErrJobTermWOSync
	case pmix.ErrExitNonzeroTerm:
		st = pmix.ErrJobNonZeroTerm
	case pmix.ErrProcAbortedBySig:
		st = pmix.ErrJobAbortedBySig
	}
	return st, pmix.Proc{Nspace: j.nspace, Rank: first.Rank}, first.ExitCode,
		fmt.Sprintf("rank %d on node %s %s", first.Rank, first.Node, first.Text)
}

// finish computes the result and stops the run's goroutines.
func (r *Run) finish() {
	r.mu.Lock()
	res := Result{Canceled: r.canceled, Lost: r.lost}
	if r.first != nil {
		e := *r.first
		res.First = &e
		res.NodeLost = r.downRanks[rankKey{e.Nspace, e.Rank}]
		res.ExitCode = e.ExitCode
		if res.ExitCode == 0 {
			res.ExitCode = 1
		}
	} else if r.canceled {
		res.ExitCode = 130
	}
	if r.lost && res.ExitCode == 0 {
		res.ExitCode = 1
	}
	r.mu.Unlock()
	for _, j := range r.jobs {
		st, _, _, _ := r.jobStatus(j)
		jr := JobResult{Cluster: j.cluster, Nspace: j.nspace, Status: st}
		r.mu.Lock()
		for _, rk := range slices.Sorted(maps.Keys(j.ends)) {
			jr.Ends = append(jr.Ends, j.ends[rk])
		}
		r.mu.Unlock()
		res.Jobs = append(res.Jobs, jr)
	}
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	r.stopOutput()
	r.mu.Lock()
	r.result = res
	r.mu.Unlock()
	close(r.stop)
	close(r.done)
}

// Nspaces returns the run's jobs as cluster:nspace.
func (r *Run) Nspaces() []string {
	out := make([]string, len(r.jobs))
	for i, j := range r.jobs {
		out[i] = cluster.Qualify(j.cluster, j.nspace)
	}
	return out
}

// Done is closed once every rank has ended.
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait waits until every rank has ended and returns how the run ended.
//
// Errors: ctx.Err() when ctx ends first (the run goes on).
func (r *Run) Wait(ctx context.Context) (Result, error) {
	select {
	case <-r.done:
		r.wg.Wait()
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.result, nil
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Terminate ends the run: every rank is sent SIGTERM (SIGKILL after its
// agent's kill grace), or SIGKILL at once when force. Wait then returns
// the result, Canceled set.
func (r *Run) Terminate(force bool) {
	r.mu.Lock()
	r.canceled = true
	r.aborting = true
	r.mu.Unlock()
	r.killAll(force, "the launcher was asked to end the run")
}
