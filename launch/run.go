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
	"sync/atomic"
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

// JobSpec is one app context of a run: "-n 2 --cluster east ./a". A run
// is one job whatever the number of its app contexts (MPMD, as mpirun's),
// even when they run on several clusters: one nspace, its ranks numbered
// across the app contexts in order, each rank's app its PMIX_APPNUM.
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
	// Nspace is the job's nspace; empty picks a unique one. Every app
	// context that gives one gives the same (they are one job), and so
	// for Session.
	Nspace  string
	Session string
	App     App
	// Info is more job-level info for the job's clients; the app
	// contexts' lists are joined.
	Info []pmix.Info
}

// Config configures a run.
type Config struct {
	// Conn is the launcher's NATS connection, owned by the caller: to any
	// server linked to the jobs' clusters, signed in for the run's job
	// on a secured deployment (see SignIn). Required unless SignIn is
	// set.
	Conn *nats.Conn
	// Jobs are the run's app contexts, which make one job; at least one.
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
	Poll time.Duration
	// ElectionWait bounds how long the run waits for a cluster's agents
	// bucket, or an agent listed up, to answer again (a leader election,
	// an agent reconnecting after its server's loss) before it fails.
	// Zero means DefaultElectionWait.
	ElectionWait time.Duration
	// NodeDown, if set, is called when the launcher finds a node of a job
	// down (unanswering for JobTTL, its liveness key expired) and counts
	// its ranks there as ended, before the run's policy acts on it.
	NodeDown func(c cluster.ID, node string)
	Logger   *slog.Logger
	// NoDirectOutput takes every record from NATS, even from the agents
	// of this machine, which otherwise also hand the job's output to the
	// launcher directly over their socket (direct.go).
	NoDirectOutput bool
	// SignIn, if set, connects for one job, named nspace: on a secured
	// deployment a launcher signs in for each job it starts with a
	// credential for that job alone (security.JobCredential), which may
	// publish that job's control requests and events only. The run calls
	// it for its own job (after naming the job: the nspace the app
	// contexts give, else a fresh one), and runs on what it returns
	// instead of Conn; and again for each job its ranks spawn
	// (PMIx_Spawn). The caller owns the connections. Nil: every job runs
	// on Conn.
	SignIn func(nspace string) (*nats.Conn, error)
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
	// Jobs is the run's job: one, whatever the number of app contexts.
	Jobs []JobResult
}

// JobResult is the job of a run.
type JobResult struct {
	// Clusters are those the job ran on, in the order of its app
	// contexts; Cluster is the first.
	Cluster  cluster.ID
	Clusters []cluster.ID
	Nspace   string
	// Status is the job's PMIX_JOB_TERM_STATUS.
	Status pmix.Status
	// Ends are by rank, each with its app context and cluster.
	Ends []ProcEnd
}

// Run is a launched run.
type Run struct {
	cfg Config
	log *slog.Logger
	// The job: its nspace, its map by rank (App and Cluster set in each),
	// and its part in each cluster it runs on.
	nspace string
	places []Placement
	jobs   []*runJob
	subs   []*nats.Subscription
	msgs   chan *nats.Msg

	// output (output.go); recs, repairs, out and reconnects are the
	// follow loop's, and a direct path's reader's (under outMu)
	recs    chan incoming
	repairs map[*runJob]*repairState
	// the direct output paths (direct.go), by cluster:node, under mu;
	// stopping: no more are made
	outputToken string
	direct      map[string]*directPath
	stopping    bool
	directShown atomic.Int64
	// outMu is held by the follow loop while it handles anything, and by
	// a direct path's reader while it handles a record of its own:
	// either one handles the run's output and ends at a time. outDone:
	// the run has finished, nothing more is handled. following is closed
	// once the loop runs (Config.Started comes first); kick wakes it.
	outMu      sync.Mutex
	outDone    bool
	following  chan struct{}
	kick       chan struct{}
	out        outputState
	reconnects uint64
	// poll's: nodes found down and since when, and the reconnects seen
	suspects       map[string]time.Time
	heard          map[string]time.Time // when each node last answered (its spawn, a poll), since the last reconnect
	pollReconnects uint64
	completes      map[rankKey]int // channels of a rank whose end was shown
	held           map[rankKey]heldEnd
	downRanks      map[rankKey]bool // ranks that went down with their node

	mu       sync.Mutex
	ends     map[pmix.Rank]ProcEnd
	pids     map[pmix.Rank]int // from the agents' spawn replies; set before Launch returns
	left     int
	first    *ProcEnd
	aborting bool
	canceled bool
	lost     bool
	stop     chan struct{}
	done     chan struct{}
	wg       sync.WaitGroup
	result   Result

	// PMIx_Spawn (spawn.go): the job's session, the jobs its processes
	// spawned, the requests being served, and whether it takes more.
	session        string
	jobInfo        []byte // what the agents got (msgpack), for a spawn's caller
	children       []*Run
	spawning       sync.WaitGroup
	childrenClosed bool
}

// runJob is the job's part in one cluster: its agents there, its key in
// the cluster's jobs bucket, its output stream and end reports there.
type runJob struct {
	cluster cluster.ID
	nspace  string
	nodes   []string
	ranks   int // placed in this cluster
	ended   int // of them
	rec     JobRecord
	js      natsjs.JetStream
	kv      natsjs.KeyValue
	claimed bool
	// listen is each node's agent socket, from its liveness record.
	listen map[string]string
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
		recs: make(chan incoming, 4096), direct: map[string]*directPath{}, following: make(chan struct{}), kick: make(chan struct{}, 1), repairs: map[*runJob]*repairState{}, completes: map[rankKey]int{}, held: map[rankKey]heldEnd{}, downRanks: map[rankKey]bool{},
		ends: map[pmix.Rank]ProcEnd{}, pids: map[pmix.Rank]int{},
		out: outputState{chans: map[chanKey]*chanState{}, seenJob: map[string]bool{}}, suspects: map[string]time.Time{}, heard: map[string]time.Time{}}
	r.reconnects = cfg.Conn.Stats().Reconnects
	if !cfg.NoDirectOutput {
		r.outputToken = newOutputToken()
	}
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
	if len(c.Jobs) == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "launch: no job to run")
	}
	if c.SignIn != nil {
		nspace := NameJob(c.Jobs)
		nc, err := c.SignIn(nspace)
		if err != nil {
			return pmix.Errorf(pmix.ErrNoPermissions, "launch: signing in for job %s: %v", nspace, err)
		}
		c.Conn = nc
	}
	if c.Conn == nil {
		return pmix.Errorf(pmix.ErrBadParam, "launch: no NATS connection")
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
	if c.ElectionWait <= 0 {
		c.ElectionWait = DefaultElectionWait
	}
	if c.JobTTL < time.Second || c.Beat >= c.JobTTL {
		return pmix.Errorf(pmix.ErrBadParam, "launch: job key TTL %v must be at least 1s and more than the beat %v", c.JobTTL, c.Beat)
	}
	size := 0
	for _, j := range c.Jobs {
		size += max(j.N, 0)
	}
	if c.Stdin.Reader != nil && c.Stdin.Rank != pmix.RankWildcard && int64(c.Stdin.Rank) >= int64(size) {
		return pmix.Errorf(pmix.ErrBadParam, "launch: stdin to rank %d, but the job has %d ranks", c.Stdin.Rank, size)
	}
	if c.Stdout == nil {
		c.Stdout = io.Discard
	}
	if c.Stderr == nil {
		c.Stderr = io.Discard
	}
	c.Stdout, c.Stderr = lockWriters(c.Stdout, c.Stderr)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// plan resolves each app context's cluster, places its ranks over the
// live agents there after the previous app contexts' ranks, picks the
// job's nspace, then claims it in every cluster the job runs on.
func (r *Run) plan(ctx context.Context) error {
	local := cluster.ID("")
	used := map[cluster.ID]map[string]int{} // slots this run already placed
	live := map[cluster.ID]map[string]*liveness.Record{}
	byCluster := map[cluster.ID]*runJob{}
	var session string
	var paths []string
	for i, spec := range r.cfg.Jobs {
		if spec.N <= 0 {
			return pmix.Errorf(pmix.ErrBadParam, "app context %d: -n must be at least 1, not %d", i+1, spec.N)
		}
		if spec.App.Path == "" {
			return pmix.Errorf(pmix.ErrBadParam, "app context %d: no program", i+1)
		}
		for _, name := range []struct{ what, given, job string }{{"nspace", spec.Nspace, r.nspace}, {"session", spec.Session, session}} {
			if name.given != "" && name.job != "" && name.given != name.job {
				return pmix.Errorf(pmix.ErrBadParam, "app context %d: %s %s, but the job's is %s: the app contexts of a run are one job", i+1, name.what, pmix.Quote(name.given), pmix.Quote(name.job))
			}
		}
		if r.nspace == "" {
			r.nspace = spec.Nspace
		}
		if session == "" {
			session = spec.Session
		}
		paths = append(paths, spec.App.Path)
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
		if live[c] == nil {
			entries, err := readAgentsThroughElection(ctx, r.cfg.Conn, c, r.cfg.ElectionWait)
			if err != nil {
				return pmix.Errorf(pmix.ErrUnreach, "reading the agents of cluster %s: %v", c, err)
			}
			live[c] = map[string]*liveness.Record{}
			for _, e := range entries {
				if e.State == liveness.Up && e.Record != nil {
					live[c][e.Node] = e.Record
				}
			}
			used[c] = map[string]int{}
		}
		var nodes []Node
		if len(spec.Hosts) > 0 {
			for _, h := range spec.Hosts {
				if live[c][h.Name] == nil {
					return fmt.Errorf("%w: unknown host %s: the live agents of cluster %s are %s", ErrPlacement, pmix.Quote(h.Name), c, strings.Join(slices.Sorted(maps.Keys(live[c])), ", "))
				}
				slots := h.Slots
				if slots == 0 {
					slots = live[c][h.Name].Slots // a hostfile entry without slots=: the agent's
				}
				nodes = append(nodes, Node{Name: h.Name, Slots: slots, Used: used[c][h.Name]})
			}
		} else {
			for _, name := range slices.Sorted(maps.Keys(live[c])) {
				rec := live[c][name]
				nodes = append(nodes, Node{Name: name, Slots: rec.Slots, Used: rec.Used + used[c][name]})
			}
		}
		places, err := Place(spec.N, nodes, spec.MapBy, spec.Oversubscribe)
		if err != nil {
			return fmt.Errorf("app context %d on cluster %s: %w", i+1, c, err)
		}
		j := byCluster[c]
		if j == nil {
			j = &runJob{cluster: c, listen: map[string]string{}}
			byCluster[c] = j
			r.jobs = append(r.jobs, j)
		}
		first := pmix.Rank(len(r.places))
		for _, p := range places {
			p.Rank += first
			p.App, p.Cluster = i, c
			r.places = append(r.places, p)
			used[c][p.Node]++
			j.ranks++
			if !slices.Contains(j.nodes, p.Node) {
				j.nodes = append(j.nodes, p.Node)
				j.listen[p.Node] = live[c][p.Node].Listen
			}
		}
		r.left += spec.N
	}
	r.session = session
	given := r.nspace != ""
	if !given {
		r.nspace = NewNspace()
	}
	for _, j := range r.jobs {
		j.nspace = r.nspace
		j.rec = JobRecord{Nspace: r.nspace, Launcher: r.cfg.Launcher, Started: time.Now(), Size: len(r.places), Nodes: j.nodes, App: strings.Join(paths, " : ")}
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
		if given {
			// Its output would mix with an earlier run's in pmixbus attach.
			if err := checkKeptOutput(ctx, js, j.cluster, j.nspace); err != nil {
				r.release()
				return err
			}
		}
	}
	return nil
}

// DefaultElectionWait bounds how long a run waits for the agents bucket
// to answer again: on a replicated cluster that lost a server, the
// streams whose leader it was elect another within seconds. A cluster
// that does not exist answers no better, so a misspelt --cluster fails
// after it too.
const DefaultElectionWait = 10 * time.Second

// readAgentsThroughElection reads cluster c's agents, again while the
// bucket does not answer (a leader election, the connection moving to
// another server), each read bounded by 2 s: a run started just after a
// server's loss starts, late, rather than fails.
func readAgentsThroughElection(ctx context.Context, nc *nats.Conn, c cluster.ID, wait time.Duration) ([]liveness.Entry, error) {
	var entries []liveness.Entry
	err := throughElection(ctx, wait, func(ctx context.Context) error {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		var err error
		entries, err = liveness.ReadAgents(actx, nc, c)
		return err
	}, func(err error) bool { return errors.Is(err, liveness.ErrUnreachable) })
	return entries, err
}

// throughElection calls try until it succeeds, fails otherwise than
// again says to retry, wait has passed or ctx ends, every 250 ms, and
// returns its last error.
func throughElection(ctx context.Context, wait time.Duration, try func(context.Context) error, again func(error) bool) error {
	deadline := time.Now().Add(wait)
	for {
		err := try(ctx)
		if err == nil || !again(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(250 * time.Millisecond):
		}
	}
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

// NameJob returns the nspace the app contexts give, or gives them a
// fresh one (NewNspace) and returns it.
func NameJob(jobs []JobSpec) string {
	for _, j := range jobs {
		if j.Nspace != "" {
			return j.Nspace
		}
	}
	nspace := NewNspace()
	for i := range jobs {
		jobs[i].Nspace = nspace
	}
	return nspace
}

// NewNspace returns a fresh nspace, "job-" and 12 random hex digits: a
// launcher that signs in for its job (security.JobCredential) names it
// before it launches.
func NewNspace() string {
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
	if err := r.subscribeChildren(); err != nil {
		return err
	}
	if err := r.cfg.Conn.Flush(); err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "subscribing: %v", err)
	}
	return nil
}

// spawn asks every agent of the job, in every cluster, to start its
// ranks, all at once, and gathers every failure. On any, it ends what did
// start.
func (r *Run) spawn(ctx context.Context) error {
	var g multierror.Group
	var mu sync.Mutex
	started := map[*runJob][]string{}
	req := SpawnRequest{
		Version: r.cfg.Version, Nspace: r.nspace, Launcher: r.cfg.Launcher, Map: r.places,
		Continuous: r.cfg.Continuous, NotifyTermination: r.cfg.NotifyTermination,
		LauncherGraceMS: r.cfg.LauncherGrace.Milliseconds(), Output: r.cfg.Output, Stdin: r.cfg.stdinRank(),
		OutputToken: r.outputToken,
	}
	var info []pmix.Info
	for _, spec := range r.cfg.Jobs {
		req.Apps = append(req.Apps, spec.App)
		info = append(info, spec.Info...)
		if req.Session == "" {
			req.Session = spec.Session
		}
	}
	info = append(info, pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(uint32(len(r.places)))))
	if r.cfg.Continuous {
		info = append(info, pmix.NewInfo(pmix.KeyJobRecoverable, pmix.Bool(true)), pmix.NewInfo(pmix.KeyJobContinuous, pmix.Bool(true)))
	}
	b, err := pmix.MarshalInfos(info)
	if err != nil {
		return pmix.Errorf(pmix.ErrBadParam, "job %s info: %v", r.nspace, err)
	}
	req.Info = b
	r.jobInfo = b
	for _, j := range r.jobs {
		for _, node := range j.nodes {
			g.Go(func() error {
				ctx, cancel := context.WithTimeout(ctx, r.cfg.SpawnTimeout)
				defer cancel()
				var reply SpawnReply
				// An agent listed up but not subscribed (reconnecting after
				// its server's loss) received nothing: asked again, within
				// bounds. One that may have acted is not.
				err := throughElection(ctx, r.cfg.ElectionWait, func(ctx context.Context) error {
					return Control(ctx, r.cfg.Conn, j.cluster, node, OpSpawn, req, &reply)
				}, func(err error) bool { return errors.Is(err, nats.ErrNoResponders) })
				if err != nil {
					return fmt.Errorf("job %s, node %s of cluster %s: %w", j.nspace, node, j.cluster, err)
				}
				mu.Lock()
				r.heard[cluster.Qualify(j.cluster, node)] = time.Now() // before follow starts: its own then
				started[j] = append(started[j], node)
				for rk, pid := range reply.Pids {
					if int64(rk) < int64(len(r.places)) && r.places[rk].local(j.cluster, node) {
						r.pids[rk] = pid
					}
				}
				mu.Unlock()
				if err := r.dialDirect(j, node); err != nil {
					r.log.Warn("no direct output path", "node", node, "err", err)
				}
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
	r.closeDirect()
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	for _, rs := range r.repairs {
		if rs.f != nil {
			rs.f.Stop()
		}
	}
	for _, j := range r.jobs {
		r.releaseKey(j)
	}
}

// releaseKey gives up job j's key, if the run still holds it: a purge
// whose marker expires, so the bucket keeps nothing of a finished job (a
// delete's marker stayed for ever, one message per run). The agents see
// the marker and end whatever they still run of the job a launcher grace
// later.
func (r *Run) releaseKey(j *runJob) {
	r.mu.Lock()
	claimed := j.claimed
	j.claimed = false
	r.mu.Unlock()
	if !claimed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := j.kv.Purge(ctx, jobKey(j.nspace), natsjs.PurgeTTL(releasedMarkerTTL)); err != nil {
		r.log.Warn("releasing the job's key", "nspace", j.nspace, "err", err)
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
			live := j.claimed
			r.mu.Unlock()
			if !live {
				continue
			}
			r.mu.Lock()
			rec := j.rec
			rec.Lost = slices.Clone(rec.Lost)
			r.mu.Unlock()
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Beat)
			if err := beatJob(ctx, j.js, j.cluster, rec, r.cfg.JobTTL); err != nil {
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
	close(r.following)
	for {
		select {
		case m := <-r.msgs:
			r.outMu.Lock()
			r.handle(m)
		case in := <-r.recs:
			r.outMu.Lock()
			r.record(in)
		case <-r.kick: // a direct path's reader handled a record: the run may have ended
			r.outMu.Lock()
		case now := <-poll.C:
			r.outMu.Lock()
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
			r.redialDirect()
		}
		r.mu.Lock()
		finished := r.left == 0
		r.mu.Unlock()
		if finished {
			r.finish()
			r.outDone = true
		}
		r.outMu.Unlock()
		if finished {
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
	if c := r.childOf(nspace); c != nil {
		return c.Source(nspace, rank)
	}
	if nspace != r.nspace || int64(rank) >= int64(len(r.places)) {
		return "", 0, false
	}
	r.mu.Lock()
	pid, ok = r.pids[rank]
	r.mu.Unlock()
	return r.places[rank].Node, pid, ok
}

// App is the app context a rank of the run runs (its PMIX_APPNUM), -1
// for a process the run did not start.
func (r *Run) App(nspace string, rank pmix.Rank) int {
	if c := r.childOf(nspace); c != nil {
		return c.App(nspace, rank)
	}
	if nspace != r.nspace || int64(rank) >= int64(len(r.places)) {
		return -1
	}
	return r.places[rank].App
}

// JobSize is the number of ranks of the run's job, of every app context,
// 0 for another nspace.
func (r *Run) JobSize(nspace string) int {
	if c := r.childOf(nspace); c != nil {
		return c.JobSize(nspace)
	}
	if nspace != r.nspace {
		return 0
	}
	return len(r.places)
}

// partOf is the part of the job in the cluster that runs rank.
func (r *Run) partOf(rank pmix.Rank) *runJob {
	if int64(rank) >= int64(len(r.places)) {
		return nil
	}
	c := r.places[rank].Cluster
	for _, j := range r.jobs {
		if j.cluster == c {
			return j
		}
	}
	return nil
}

// ended records one rank's end and applies the run's policy.
func (r *Run) ended(end ProcEnd) {
	if end.Nspace != r.nspace || int64(end.Rank) >= int64(len(r.places)) {
		return
	}
	pl := r.places[end.Rank]
	if end.Cluster != "" && end.Cluster != pl.Cluster {
		return // not the agent that runs it
	}
	end.App, end.Cluster = pl.App, pl.Cluster
	r.mu.Lock()
	if _, dup := r.ends[end.Rank]; dup {
		r.mu.Unlock()
		return
	}
	r.ends[end.Rank] = end
	r.left--
	abort := false
	if end.Abnormal() && r.first == nil {
		e := end
		r.first = &e
		abort = !r.cfg.Continuous && !r.aborting
		r.aborting = r.aborting || abort
	}
	jobDone := r.left == 0
	r.mu.Unlock()
	if abort {
		r.log.Info("aborting the run", "nspace", end.Nspace, "rank", end.Rank, "app", end.App, "node", end.Node, "why", end.Text)
		r.killAll(false, fmt.Sprintf("rank %d (app %d) of %s %s", end.Rank, end.App, end.Nspace, end.Text))
	}
	if jobDone {
		for _, j := range r.jobs {
			r.jobEnded(j)
		}
	}
}

// killAll asks every agent of every job to end its ranks, silently: the
// run is ending.
func (r *Run) killAll(force bool, reason string) {
	var g multierror.Group
	for _, j := range r.jobs {
		for _, node := range j.nodes {
			if r.nodeLost(j, node) {
				continue // it would only time out: its ranks went with it
			}
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

// nodeLost reports whether every rank of j on node went down with it.
func (r *Run) nodeLost(j *runJob, node string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.places {
		if p.Cluster == j.cluster && p.Node == node && !r.downRanks[rankKey{j.nspace, p.Rank}] {
			return false
		}
	}
	return true
}

// poll asks the agents of ranks not heard of: an agent that is gone, whose
// key is no longer up, took its ranks with it (TERM_WO_SYNC, as the
// node-down events say); a rank its agent no longer runs ended without a
// report reaching us.
func (r *Run) poll() {
	for _, j := range r.jobs {
		r.mu.Lock()
		pending := map[string][]pmix.Rank{}
		for _, p := range r.places {
			if _, ok := r.ends[p.Rank]; !ok && p.Cluster == j.cluster {
				pending[p.Node] = append(pending[p.Node], p.Rank)
			}
		}
		r.mu.Unlock()
		for node, ranks := range pending {
			ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Poll)
			var reply JobsReply
			asked := time.Now()
			err := Control(ctx, r.cfg.Conn, j.cluster, node, OpJobs, nil, &reply)
			cancel()
			if err != nil {
				// The clock starts at the first unanswered poll: a node
				// cut off is reported once it has not answered for the job
				// TTL and its key has expired meanwhile (the liveness TTL,
				// shorter), not a TTL after that.
				if errors.Is(err, ErrNoAgent) && r.downFor(j.cluster, node, asked) >= r.cfg.JobTTL && r.nodeDown(j.cluster, node) {
					r.mu.Lock()
					for _, rk := range ranks {
						r.downRanks[rankKey{j.nspace, rk}] = true
					}
					if !slices.Contains(j.rec.Lost, node) {
						j.rec.Lost = append(j.rec.Lost, node) // the next beat tells the node, should it come back
					}
					r.mu.Unlock()
					if r.cfg.NodeDown != nil {
						r.cfg.NodeDown(j.cluster, node)
					}
					for _, rk := range ranks {
						r.ended(ProcEnd{Nspace: j.nspace, Rank: rk, Node: node, State: pmix.ErrProcTermWOSync, ExitCode: 1, Text: "went down with its node (its agent stopped answering and its liveness key expired)"})
					}
				}
				continue
			}
			delete(r.suspects, cluster.Qualify(j.cluster, node))
			r.heard[cluster.Qualify(j.cluster, node)] = time.Now()
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
	_, seen := r.ends[rk]
	_, held := r.held[rankKey{j.nspace, rk}]
	r.mu.Unlock()
	if seen || held || len(r.msgs) > 0 {
		return
	}
	r.ended(ProcEnd{Nspace: j.nspace, Rank: rk, Node: node, State: pmix.ErrProcTermWOSync, ExitCode: 1, Text: "ended, but its agent's report never arrived"})
}

// downFor is how long node has been found down, unanswering, by polls
// (from its last answer, or the start of the first unanswered poll,
// asked) since the launcher's connection last came back: a NATS server that restarts lets
// the agents' keys expire and their subscriptions lapse for a moment,
// which is no node going down (the agents wait a TTL after their own
// outage too).
func (r *Run) downFor(c cluster.ID, node string, asked time.Time) time.Duration {
	if n := r.cfg.Conn.Stats().Reconnects; n != r.pollReconnects {
		r.pollReconnects = n
		clear(r.suspects)
		clear(r.heard)
	}
	k := cluster.Qualify(c, node)
	since, ok := r.suspects[k]
	if !ok {
		// From its last answer (the spawn's or a poll's), when it
		// answered since the connection came back, else from this
		// unanswered request's start: a node cut off between two polls
		// is reported no later than the job TTL after the cut.
		since = asked
		if h, ok := r.heard[k]; ok && h.Before(asked) {
			since = h
		}
		r.suspects[k] = since
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

// jobEnded raises the job's PMIX_EVENT_JOB_END in j's cluster and
// releases its key there.
func (r *Run) jobEnded(j *runJob) {
	status, affected, code, text := r.jobStatus()
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
	r.raise(j.cluster, "jobend."+string(j.cluster)+"."+j.nspace+"."+j.rec.Started.Format(time.RFC3339Nano), pmix.EventJobEnd, info, "the job's end")
	r.releaseKey(j)
}

// raise publishes an event of the run's host RM, NAMESPACE range, to the
// job's part in cluster c; a failure is logged (what says of what).
func (r *Run) raise(c cluster.ID, id string, code pmix.Status, info []pmix.Info, what string) {
	m := &event.Message{ID: id, Code: code, Range: pmix.RangeNamespace, Source: bus.Origin{Cluster: string(c)}, Info: info, Time: time.Now()}
	scopes, err := event.Scopes(event.Place{Cluster: c}, m, nil, nil)
	if err == nil {
		err = event.Publish(r.cfg.Conn, m, scopes)
	}
	if err != nil {
		r.log.Warn("raising "+what, "nspace", r.nspace, "err", err)
	}
}

// jobStatus is how the job ended: its PMIX_JOB_TERM_STATUS, the proc the
// end is about (its first abnormal rank, else the whole job), its exit
// code and a text.
func (r *Run) jobStatus() (pmix.Status, pmix.Proc, int, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	// The run's first failure, else its lowest failing rank.
	first := r.first
	for _, rk := range slices.Sorted(maps.Keys(r.ends)) {
		if e := r.ends[rk]; first == nil && e.Abnormal() {
			first = &e
		}
	}
	if first == nil {
		if r.canceled {
			return pmix.ErrJobCanceled, pmix.Proc{Nspace: r.nspace, Rank: pmix.RankWildcard}, 0, "canceled"
		}
		return pmix.Success, pmix.Proc{Nspace: r.nspace, Rank: pmix.RankWildcard}, 0, "every rank exited normally"
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
	return st, pmix.Proc{Nspace: r.nspace, Rank: first.Rank}, first.ExitCode,
		fmt.Sprintf("rank %d (app %d) on node %s %s", first.Rank, first.App, first.Node, first.Text)
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
	st, _, _, _ := r.jobStatus()
	jr := JobResult{Cluster: r.jobs[0].cluster, Nspace: r.nspace, Status: st}
	for _, j := range r.jobs {
		jr.Clusters = append(jr.Clusters, j.cluster)
	}
	r.mu.Lock()
	for _, rk := range slices.Sorted(maps.Keys(r.ends)) {
		jr.Ends = append(jr.Ends, r.ends[rk])
	}
	r.mu.Unlock()
	res.Jobs = []JobResult{jr}
	for _, s := range r.subs {
		_ = s.Unsubscribe()
	}
	r.closeDirect()
	r.stopOutput()
	r.mu.Lock()
	r.result = res
	r.mu.Unlock()
	close(r.stop)
	// Done waits for the jobs the run's processes spawned too.
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.awaitChildren()
		close(r.done)
	}()
}

// Nspace is the run's job's nspace.
func (r *Run) Nspace() string { return r.nspace }

// Nspaces returns the run's job as cluster:nspace, once for each cluster
// it runs on.
func (r *Run) Nspaces() []string {
	out := make([]string, len(r.jobs))
	for i, j := range r.jobs {
		out[i] = cluster.Qualify(j.cluster, j.nspace)
	}
	return out
}

// Done is closed once every rank has ended, and every rank of the jobs
// its processes spawned.
func (r *Run) Done() <-chan struct{} { return r.done }

// Wait waits until every rank has ended, and then the jobs its processes
// spawned, and returns how the run ended: the run's job first in Jobs,
// then each spawned job.
//
// Errors: ctx.Err() when ctx ends first (the run goes on).
func (r *Run) Wait(ctx context.Context) (Result, error) {
	select {
	case <-r.done:
		r.wg.Wait()
		r.mu.Lock()
		res := r.result
		r.mu.Unlock()
		return r.withChildren(ctx, res)
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
	children := append([]*Run(nil), r.children...)
	r.mu.Unlock()
	r.killAll(force, "the launcher was asked to end the run")
	for _, c := range children {
		c.Terminate(force)
	}
}
