package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/event"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/subjects"
)

// Job is a job as the daemon registers it with its agent.
type Job struct {
	Nspace  string
	Session string
	Info    []pmix.Info
	// Procs maps every rank of the job to its node; a node of another
	// cluster (a job across clusters) is named "cluster:node".
	Procs map[pmix.Rank]string
	// Apps are the job's app contexts, in rank order.
	Apps []JobApp
}

// JobApp is one app context of a job as its host sees it.
type JobApp struct {
	// Size is its number of ranks; its ranks follow the previous app's.
	Size int
	// Argv is its command line, the program as given first.
	Argv []string
}

// Host is the agent as its launch service sees it.
type Host interface {
	// RegisterJob registers a job the daemon launches; a job of that
	// nspace already registered is refused (pmix.ErrDuplicateKey).
	RegisterJob(ctx context.Context, j Job) error
	DeregisterJob(ctx context.Context, nspace string) error
	// RegisterClient registers a local rank whose process the daemon
	// watches, and returns the environment to start it with.
	RegisterClient(ctx context.Context, p pmix.Proc) (map[string]string, error)
	DeregisterClient(ctx context.Context, p pmix.Proc) error
	// ClientState is what the agent knows of the rank's life as a client.
	ClientState(p pmix.Proc) (ClientState, bool)
	// Raise publishes an event as the cluster's host RM does.
	Raise(m *event.Message) error
	// ProcTerminated tells the agent's collectives that a local rank
	// ended (abnormal: without Finalize, or killed), so its connected
	// groups and pending connects hear of it. Reporting twice is harmless.
	ProcTerminated(ctx context.Context, p pmix.Proc, abnormal bool) error
}

// DaemonConfig configures a Daemon.
type DaemonConfig struct {
	// Conn is the agent's NATS connection, owned by the caller. Required.
	Conn    *nats.Conn
	Cluster cluster.ID
	Node    string
	Host    Host
	// Version is the agent's; a launcher of another version is refused.
	Version string
	// KillGrace is how long a process asked to end (SIGTERM) has before
	// SIGKILL. Zero means 2 s.
	KillGrace time.Duration
	// LauncherGrace is how long the daemon waits, after a job's launcher
	// key expired, before it ends the job's processes, when the job's
	// request gave none. Zero means DefaultLauncherGrace.
	LauncherGrace time.Duration
	// LibDir, if set, is put first on the LD_LIBRARY_PATH of every process
	// the daemon starts: the directory of pmixbus's libpmix.so.2, so that
	// unmodified PMIx C programs load it instead of OpenPMIx's.
	LibDir string
	// JobUser, if set, is who every process runs as: the daemon runs as
	// root, and its processes cannot read what only root may (the key
	// files). Nil: the daemon's user. The host must let that user attach
	// (the agent's socket, its uid check).
	JobUser *JobUser
	// Replicas of the cluster's jobs bucket when the daemon creates or
	// updates it: 1 to 5, 0 is 1.
	Replicas int
	// Output captures the processes' stdout and stderr into the cluster's
	// output stream (the agent's iof service); nil discards them.
	Output *iof.Service
	Logger *slog.Logger
}

// Daemon is the launch service of one agent: it answers the control
// requests of its node (spawn, kill, jobs), starts and watches the ranks
// placed on it, classifies how each ended, raises the event that says so
// and reports it to the job's launcher. It is safe for concurrent use;
// Shutdown stops it and ends the processes it started.
type Daemon struct {
	cfg DaemonConfig
	log *slog.Logger

	mu     sync.Mutex
	closed bool
	jobs   map[string]*localJob
	// finished: jobs whose ranks here all ended, for a while (FinishedKeep),
	// oldest first.
	finished []finishedJob
	sub      *nats.Subscription
	watcher  natsjs.KeyWatcher
	wg       sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

type finishedJob struct {
	state JobState
	at    time.Time
}

type localJob struct {
	req   SpawnRequest
	appOf []int       // by rank: its app context
	paths []string    // by app: the program resolved, for those with ranks here
	first []pmix.Rank // by app: its first rank
	procs map[pmix.Rank]*localProc
	// starting holds the output capture of ranks whose process is being
	// started: a rank may connect and log before its start returns, and
	// its logs must go to the capture its output goes to (a second one
	// would number its records from 1 again, and the launcher would take
	// them for records already shown).
	starting map[pmix.Rank]*iof.Source
	left     int
	orphan   *time.Timer // the launcher's key expired; ends the job when it fires
	lost     bool        // the launcher declared this node lost: its ranks here are being ended
	started  time.Time
	local    []pmix.Rank // the job's ranks on this node, sorted
}

// mpirunEnv is what Open MPI's mpirun tells each rank besides PMIx, which
// scripts and programs read (OMPI_COMM_WORLD_RANK and the like); the
// app's own environment wins.
func mpirunEnv(j *localJob, r pmix.Rank) map[string]string {
	local := strconv.Itoa(slices.Index(j.local, r))
	sizes, firsts := make([]string, len(j.first)), make([]string, len(j.first))
	for i, f := range j.first {
		next := pmix.Rank(len(j.req.Map))
		if i+1 < len(j.first) {
			next = j.first[i+1]
		}
		sizes[i], firsts[i] = strconv.Itoa(int(next-f)), f.String()
	}
	return map[string]string{
		"OMPI_MCA_orte_app_num":      strconv.Itoa(j.appOf[r]),
		"OMPI_APP_CTX_NUM_PROCS":     strings.Join(sizes, " "),
		"OMPI_FIRST_RANKS":           strings.Join(firsts, " "),
		"OMPI_COMM_WORLD_RANK":       r.String(),
		"OMPI_COMM_WORLD_SIZE":       strconv.Itoa(len(j.req.Map)),
		"OMPI_COMM_WORLD_LOCAL_RANK": local,
		"OMPI_COMM_WORLD_LOCAL_SIZE": strconv.Itoa(len(j.local)),
		"OMPI_COMM_WORLD_NODE_RANK":  local,
		"OMPI_UNIVERSE_SIZE":         strconv.Itoa(len(j.req.Map)),
		// As mpirun: Open MPI's MPI_Init then opens no component for a
		// singleton or for Slurm's or Cray's PMI (~5 ms a rank).
		"OMPI_MCA_ess":  "^singleton",
		"OMPI_MCA_pmix": "^s1,s2,cray,isolated",
	}
}

// ompiBoundAtLaunch tells Open MPI that the launcher applied its binding
// policy, so that MPI_Init does not bind the process itself. mpirun sets it
// whenever it binds (2 ranks or fewer: to a core each), and Cray's native
// launch always, for what it spares: Open MPI's MPI_Init then loads no
// topology at start. pmixbus binds no rank, and sets it too: without it
// each Open MPI rank loaded the node's topology in MPI_Init, hwloc's
// plugins with it (~14 ms of a rank's CPU here: most of what a 2-rank
// MPI_Init took more than under mpirun). Open MPI still loads the topology
// later where it needs it.
const ompiBoundAtLaunch = "OMPI_MCA_orte_bound_at_launch"

// asksOpenMPIToBind reports whether the rank's environment, or the
// agent's, asks Open MPI to bind the process itself
// (OMPI_MCA_hwloc_base_binding_policy): then it must not hear that the
// launcher did. (A binding policy in an MCA parameter file is not seen:
// give it with -x, docs/launch.md.)
func asksOpenMPIToBind(env map[string]string) bool {
	const policy = "OMPI_MCA_hwloc_base_binding_policy"
	if _, set := env[policy]; set {
		return true
	}
	_, set := os.LookupEnv(policy)
	return set
}

// incarnation tells this run of the job from an earlier one of the same
// nspace: its launcher and start.
func (j *localJob) incarnation() string {
	return j.req.Launcher + "/" + j.started.Format(time.RFC3339Nano)
}

type localProc struct {
	proc   pmix.Proc
	p      *Process
	killed bool // ended on request: PMIX_ERR_PROC_KILLED_BY_CMD
	silent bool // ended as part of ending the job: no event
	ended  string
	end    *ProcEnd // the report of its end, once it ended
	done   chan struct{}
	// out captures the process's stdout and stderr; closed once the
	// process has ended, which stores an unterminated last line and ends
	// both channels. Nil when the daemon has no output service.
	out *iof.Source
	// in is the process's forwarded stdin (stdin.go), nil when it reads
	// the null device.
	in *stdinPipe
}

// NewDaemon checks cfg and returns a Daemon; Start starts it.
func NewDaemon(cfg DaemonConfig) (*Daemon, error) {
	switch {
	case cfg.Conn == nil:
		return nil, pmix.Errorf(pmix.ErrBadParam, "launch daemon: no NATS connection")
	case cfg.Host == nil:
		return nil, pmix.Errorf(pmix.ErrBadParam, "launch daemon: no host")
	case cfg.Node == "":
		return nil, pmix.Errorf(pmix.ErrBadParam, "launch daemon: no node")
	}
	if err := cfg.Cluster.Validate(); err != nil {
		return nil, err
	}
	if cfg.KillGrace <= 0 {
		cfg.KillGrace = 2 * time.Second
	}
	if cfg.LauncherGrace <= 0 {
		cfg.LauncherGrace = DefaultLauncherGrace
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Daemon{cfg: cfg, log: log.With("service", "launch"), jobs: map[string]*localJob{}, ctx: ctx, cancel: cancel}, nil
}

// Start creates the cluster's jobs bucket, watches it for launchers that
// died, and answers the node's control requests.
//
// Errors: pmix.ErrUnreach when JetStream or NATS refuse; ctx.Err().
func (d *Daemon) Start(ctx context.Context) error {
	_, kv, err := openJobs(ctx, d.cfg.Conn, d.cfg.Cluster, max(d.cfg.Replicas, 1))
	if err != nil {
		return err
	}
	w, err := kv.WatchAll(d.ctx, natsjs.UpdatesOnly())
	if err != nil {
		return pmix.Errorf(pmix.ErrUnreach, "watching %s: %v", JobsBucket, err)
	}
	// pmix.ctl.<cluster>.<node>.<op>, and .<op>.<nspace> for a job's.
	sub, err := d.cfg.Conn.Subscribe(ControlSubject(d.cfg.Cluster, d.cfg.Node, ">"), d.request)
	if err != nil {
		_ = w.Stop()
		return pmix.Errorf(pmix.ErrUnreach, "subscribing to the control subject: %v", err)
	}
	d.mu.Lock()
	d.sub, d.watcher = sub, w
	d.mu.Unlock()
	d.goFunc(func() { d.watchLaunchers(w) })
	d.goFunc(d.watchLink)
	return nil
}

// launcherGrace is how long j's processes live on once its launcher is
// gone or this node lost NATS: the job's own, else the daemon's.
func (d *Daemon) launcherGrace(j *localJob) time.Duration {
	if g := time.Duration(j.req.LauncherGraceMS) * time.Millisecond; g > 0 {
		return g
	}
	return d.cfg.LauncherGrace
}

// linkCheck is how often watchLink looks at the NATS connection.
const linkCheck = 250 * time.Millisecond

// watchLink ends the ranks of every job whose launcher grace has passed
// while this agent could not reach NATS: the node's liveness key expired
// long before, the other agents declared it down and the job heard its
// ranks' end (TERM_WO_SYNC), and the launcher, cut off as well or
// counting them lost, has moved on. A NATS server that restarts within
// the grace ends nothing. The agent's pings (a third of the liveness TTL)
// find a silent cut within the TTL.
func (d *Daemon) watchLink() {
	t := time.NewTicker(linkCheck)
	defer t.Stop()
	var since time.Time // when the connection was first seen down; zero while up
	for {
		select {
		case <-d.ctx.Done():
			return
		case now := <-t.C:
			if d.cfg.Conn.IsConnected() {
				since = time.Time{}
				continue
			}
			if since.IsZero() {
				since = now
			}
			var ending []string
			d.mu.Lock()
			for nspace, j := range d.jobs {
				grace := d.launcherGrace(j)
				if !j.lost && now.Sub(since) >= grace {
					j.lost = true
					ending = append(ending, nspace)
				}
			}
			d.mu.Unlock()
			for _, nspace := range ending {
				d.log.Warn("cut off from NATS for longer than the job's launcher grace: its ranks here were declared lost elsewhere; ending them", "nspace", nspace, "cut_off_for", now.Sub(since).Round(time.Millisecond))
				_ = d.Kill(KillRequest{Nspace: nspace, Silent: true, Reason: "its node was cut off from NATS for longer than the launcher grace"})
			}
		}
	}
}

// goFunc runs f on a goroutine Shutdown waits for; false once closed.
func (d *Daemon) goFunc(f func()) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return false
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		f()
	}()
	return true
}

// request takes a control request off NATS and answers it on its own
// goroutine, so a slow spawn holds up no other request.
func (d *Daemon) request(m *nats.Msg) {
	op, job, _ := strings.Cut(strings.TrimPrefix(m.Subject, ControlSubject(d.cfg.Cluster, d.cfg.Node, "")), ".")
	if !d.goFunc(func() { d.answer(op, job, m) }) {
		respond(m, Reply{Error: errorOf(ErrClosed)})
	}
}

// forJob checks that a request for one job came on that job's subject
// (JobControlSubject: job is its last token): a launcher signed in for
// one job may publish on its own job's subjects only, and this makes
// the body agree with what NATS checked.
//
// Errors: pmix.ErrNoPermissions.
func forJob(op, job string, req jobRequest) error {
	if job != subjects.EscapeToken(req.jobNspace()) {
		return pmix.Errorf(pmix.ErrNoPermissions, "a %s request for job %s on the control subject of job %s: refused (docs/security.md)",
			op, pmix.Quote(req.jobNspace()), pmix.Quote(subjects.Unescaped(job)))
	}
	return nil
}

func (d *Daemon) answer(op, job string, m *nats.Msg) {
	if job != "" && !jobOp(op) {
		respond(m, Reply{Error: errorOf(pmix.Errorf(pmix.ErrNotSupported, "unknown control operation %s", pmix.Quote(op+"."+job)))})
		return
	}
	switch op {
	case OpSpawn:
		var req SpawnRequest
		err := decode(m.Data, &req)
		if err == nil {
			err = forJob(op, job, req)
		}
		if err != nil {
			respond(m, SpawnReply{Node: d.cfg.Node, Error: errorOf(err)})
			return
		}
		pids, err := d.spawn(d.ctx, &req)
		respond(m, SpawnReply{Node: d.cfg.Node, Pids: pids, Error: errorOf(err)})
	case OpKill:
		var req KillRequest
		err := decode(m.Data, &req)
		if err == nil {
			err = forJob(op, job, req)
		}
		if err == nil {
			err = d.Kill(req)
		}
		respond(m, Reply{Error: errorOf(err)})
	case OpJobs:
		respond(m, JobsReply{Node: d.cfg.Node, Jobs: d.Jobs(), Finished: d.Finished()})
	case OpStdin:
		d.answerStdin(m, job)
	default:
		respond(m, Reply{Error: errorOf(pmix.Errorf(pmix.ErrNotSupported, "unknown control operation %s", pmix.Quote(op)))})
	}
}

func respond(m *nats.Msg, v any) {
	if m.Reply == "" {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(Reply{Error: errorOf(err)})
	}
	_ = m.Respond(b)
}

// spawn starts the ranks req places on this node. On any failure it
// leaves nothing behind: the processes it started are killed and the job
// is deregistered.
func (d *Daemon) spawn(ctx context.Context, req *SpawnRequest) (map[pmix.Rank]int, error) {
	if req.Version != d.cfg.Version {
		return nil, fmt.Errorf("%w: the launcher is version %s, the agent of node %s is %s", ErrVersion, pmix.Quote(req.Version), d.cfg.Node, pmix.Quote(d.cfg.Version))
	}
	if err := req.check(); err != nil {
		return nil, err
	}
	ranks := ranksOn(req.Map, d.cfg.Cluster, d.cfg.Node)
	if len(ranks) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "job %s places no rank on node %s", req.Nspace, d.cfg.Node)
	}
	var infos []pmix.Info
	if len(req.Info) > 0 {
		if err := proto.CheckLengths(req.Info); err != nil {
			return nil, pmix.Errorf(pmix.ErrBadParam, "job %s info: %v", req.Nspace, err)
		}
		var err error
		if infos, err = pmix.UnmarshalInfos(req.Info); err != nil {
			return nil, pmix.Errorf(pmix.ErrBadParam, "job %s info: %v", req.Nspace, err)
		}
	}
	j := &localJob{req: *req, procs: map[pmix.Rank]*localProc{}, starting: map[pmix.Rank]*iof.Source{}, started: time.Now(), local: ranks,
		appOf: make([]int, len(req.Map)), paths: make([]string, len(req.Apps)), first: make([]pmix.Rank, len(req.Apps))}
	procs := make(map[pmix.Rank]string, len(req.Map))
	sizes := make([]int, len(req.Apps))
	for _, p := range req.Map {
		j.appOf[p.Rank] = p.App
		sizes[p.App]++
		procs[p.Rank] = p.Node
		if !p.local(d.cfg.Cluster, p.Node) {
			procs[p.Rank] = cluster.Qualify(p.Cluster, p.Node)
		}
	}
	apps := make([]JobApp, len(req.Apps))
	for i, app := range req.Apps {
		apps[i] = JobApp{Size: sizes[i], Argv: append([]string{app.Path}, app.Args...)}
		if i > 0 {
			j.first[i] = j.first[i-1] + pmix.Rank(sizes[i-1])
		}
	}
	for _, r := range ranks {
		a := j.appOf[r]
		if j.paths[a] != "" {
			continue
		}
		path, err := resolveProgram(req.Apps[a])
		if err != nil {
			return nil, fmt.Errorf("%w: %s on node %s: %v", ErrNoProgram, pmix.Quote(req.Apps[a].Path), d.cfg.Node, err)
		}
		j.paths[a] = path
	}

	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil, ErrClosed
	}
	if _, dup := d.jobs[req.Nspace]; dup {
		d.mu.Unlock()
		return nil, fmt.Errorf("%w: %s on node %s", ErrNspaceTaken, req.Nspace, d.cfg.Node)
	}
	d.jobs[req.Nspace] = j
	d.mu.Unlock()

	if err := d.cfg.Host.RegisterJob(ctx, Job{Nspace: req.Nspace, Session: req.Session, Info: infos, Procs: procs, Apps: apps}); err != nil {
		d.mu.Lock()
		delete(d.jobs, req.Nspace)
		d.mu.Unlock()
		return nil, err
	}
	pids := make(map[pmix.Rank]int, len(ranks))
	for _, r := range ranks {
		lp, err := d.start(ctx, j, r)
		if err != nil {
			d.undo(j)
			return nil, err
		}
		pids[r] = lp.p.Pid()
	}
	// Watch them only now: a rank that ended at once is reported, and its
	// job's other ranks are there to hear of it.
	d.mu.Lock()
	for _, lp := range j.procs {
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			d.reap(j, lp)
		}()
	}
	d.mu.Unlock()
	here, lowest := 0, pmix.Rank(len(req.Map)) // the job's ranks in this cluster, the lowest
	for _, p := range req.Map {
		if p.Cluster == "" || p.Cluster == d.cfg.Cluster {
			here++
			lowest = min(lowest, p.Rank)
		}
	}
	if d.cfg.Output != nil && lowest == ranks[0] {
		// The agent of the job's lowest rank in this cluster tells the
		// viewers of the cluster's stream how many ranks it carries (all
		// of a job of one cluster): they are done when each one's output
		// has ended.
		meta, _ := json.Marshal(iof.JobMetaRecord{Size: here})
		if err := d.cfg.Output.JobRecord(ctx, req.Nspace, iof.JobMeta, meta); err != nil {
			d.log.Warn("recording the job's size for its viewers", "nspace", req.Nspace, "err", err)
		}
	}
	d.log.Info("job started", "nspace", req.Nspace, "ranks", FormatRanks(ranks), "launcher", req.Launcher)
	return pids, nil
}

// start registers rank r as a client and starts its process.
func (d *Daemon) start(ctx context.Context, j *localJob, r pmix.Rank) (*localProc, error) {
	proc := pmix.Proc{Nspace: j.req.Nspace, Rank: r}
	env, err := d.cfg.Host.RegisterClient(ctx, proc)
	if err != nil {
		return nil, err
	}
	app, path := j.req.Apps[j.appOf[r]], j.paths[j.appOf[r]]
	merged := maps.Clone(app.Env)
	if merged == nil {
		merged = map[string]string{}
	}
	var userEnv map[string]string
	if u := d.cfg.JobUser; u != nil {
		userEnv = u.env()
	}
	for k, v := range joinEnv(mpirunEnv(j, r), userEnv) {
		if _, set := merged[k]; !set {
			merged[k] = v
		}
	}
	if _, set := merged[ompiBoundAtLaunch]; !set && !asksOpenMPIToBind(merged) {
		merged[ompiBoundAtLaunch] = "1"
	}
	maps.Copy(merged, env)
	if dir := d.cfg.LibDir; dir != "" {
		merged["LD_LIBRARY_PATH"] = prependPath(dir, merged["LD_LIBRARY_PATH"], os.Getenv("LD_LIBRARY_PATH"))
	}
	cmd := Command{Path: path, Args: app.Args, Argv0: app.Path, Env: merged, Dir: app.Dir, Stdin: j.req.stdinFor(r), User: d.cfg.JobUser}
	var out *iof.Source
	if d.cfg.Output != nil {
		spec := j.req.Output
		out, err = d.cfg.Output.Source(proc, iof.SourceOptions{
			Incarnation: j.incarnation(), Raw: spec.Raw, Limit: iof.Limit{Bytes: spec.Limit, DropOldest: spec.DropOldest},
		})
		if err != nil {
			_ = d.cfg.Host.DeregisterClient(ctx, proc)
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = out.Stdout(), out.Stderr()
		d.mu.Lock()
		j.starting[r] = out
		d.mu.Unlock()
	}
	p, err := Start(cmd)
	if err != nil {
		d.mu.Lock()
		delete(j.starting, r)
		d.mu.Unlock()
		if out != nil {
			_ = out.Close()
		}
		_ = d.cfg.Host.DeregisterClient(ctx, proc)
		return nil, fmt.Errorf("%w: rank %v on node %s: %v", ErrStart, r, d.cfg.Node, err)
	}
	lp := &localProc{proc: proc, p: p, done: make(chan struct{}), out: out}
	if cmd.Stdin {
		lp.in = d.forwardStdin(lp)
	}
	d.mu.Lock()
	delete(j.starting, r) // in the same step: the rank's capture is always found
	j.procs[r] = lp
	j.left++
	d.mu.Unlock()
	return lp, nil
}

// undo ends a job whose spawn failed: its started processes are killed
// and waited for, its clients and the job deregistered.
func (d *Daemon) undo(j *localJob) {
	d.mu.Lock()
	procs := slices.Collect(maps.Values(j.procs))
	delete(d.jobs, j.req.Nspace)
	d.mu.Unlock()
	for _, lp := range procs {
		_ = lp.p.Kill()
		<-lp.p.Done()
		_ = d.cfg.Host.DeregisterClient(d.ctx, lp.proc)
	}
	_ = d.cfg.Host.DeregisterJob(d.ctx, j.req.Nspace)
}

// reap waits for a process to end, then reports it.
func (d *Daemon) reap(j *localJob, lp *localProc) {
	<-lp.p.Done()
	if lp.out != nil {
		// Before the end is reported: the launcher sees the output end first.
		if err := lp.out.Close(); err != nil {
			d.log.Warn("storing a process's last output", "proc", lp.proc, "err", err)
		}
	}
	exit := lp.p.exit
	st, _ := d.cfg.Host.ClientState(lp.proc)
	d.mu.Lock()
	killed, silent := lp.killed, lp.silent
	d.mu.Unlock()
	state, code, text := Classify(exit, st, killed)
	end := ProcEnd{Nspace: lp.proc.Nspace, Rank: lp.proc.Rank, Node: d.cfg.Node, App: j.appOf[lp.proc.Rank], Cluster: d.cfg.Cluster,
		Pid: lp.p.Pid(), State: state, ExitCode: code, Signal: int(exit.Signal), Text: text}
	raise := state != pmix.Success && !silent
	// A normal end raises PMIX_EVENT_PROC_TERMINATED too: for every
	// handler when the job asked (--notify-termination); else only for
	// registrations that name the code (PMIX_EVENT_NON_DEFAULT), and
	// uncached — without such a registration NATS carries it nowhere.
	asked := j.req.NotifyTermination
	if state == pmix.Success && !silent {
		state, raise = pmix.EventProcTerminated, true
	}
	if raise {
		t := event.Termination{
			Proc: lp.proc, Cluster: string(d.cfg.Cluster), Node: d.cfg.Node, Session: j.req.Session,
			Code: state, ExitCode: code, HasExitCode: true, Incarnation: j.incarnation(),
			Text: fmt.Sprintf("%v on node %s %s", lp.proc, d.cfg.Node, text),
		}
		m := event.TerminationEvent(t)
		if state == pmix.EventProcTerminated && !asked {
			m.Info = append(m.Info, pmix.NewInfo(pmix.KeyEventNonDefault, pmix.Bool(true)), pmix.NewInfo(pmix.KeyEventDoNotCache, pmix.Bool(true)))
		}
		if err := d.cfg.Host.Raise(m); err != nil {
			d.log.Warn("could not raise a process's termination event", "proc", lp.proc, "code", state, "err", err)
		}
		if state != pmix.EventProcTerminated && j.req.Continuous {
			// The job runs on: its survivors hear of the end under
			// PMIX_ERR_PROC_ABORTED too (event.AbortedEvent).
			if err := d.cfg.Host.Raise(event.AbortedEvent(t)); err != nil {
				d.log.Warn("could not raise a process's termination event", "proc", lp.proc, "code", pmix.ErrProcAborted, "err", err)
			}
		}
	}
	if err := d.cfg.Host.ProcTerminated(d.ctx, lp.proc, end.State != pmix.Success); err != nil && !errors.Is(err, ErrClosed) {
		d.log.Debug("reporting a process's end to the collectives", "proc", lp.proc, "err", err)
	}
	_ = d.cfg.Host.DeregisterClient(d.ctx, lp.proc)
	d.mu.Lock()
	lp.ended, lp.end = text, &end
	close(lp.done)
	j.left--
	last := j.left == 0
	d.mu.Unlock()
	if last {
		// Before the launcher hears of the last end: the node's liveness
		// key no longer counts the job's slots when the next run places.
		_ = d.cfg.Host.DeregisterJob(d.ctx, j.req.Nspace)
	}
	if b, err := json.Marshal(end); err == nil {
		if err := d.cfg.Conn.Publish(StateSubject(d.cfg.Cluster, lp.proc.Nspace), b); err != nil {
			d.log.Warn("could not report a process's end to its launcher", "proc", lp.proc, "err", err)
		}
	}
	if last {
		d.mu.Lock()
		delete(d.jobs, j.req.Nspace) // after the report: a launcher asking for the job's ranks meanwhile still finds it
		d.pruneFinishedLocked(time.Now())
		if len(d.finished) == MaxFinished {
			d.finished = slices.Delete(d.finished, 0, 1)
		}
		d.finished = append(d.finished, finishedJob{state: j.stateLocked(), at: time.Now()})
		if j.orphan != nil {
			j.orphan.Stop()
		}
		d.mu.Unlock()
		d.log.Info("job's ranks on this node ended", "nspace", j.req.Nspace)
	}
}

// Kill ends processes of a job on this node (KillRequest).
//
// Errors: ErrUnknownJob when the node runs no rank of the job (any more).
func (d *Daemon) Kill(req KillRequest) error {
	d.mu.Lock()
	j, ok := d.jobs[req.Nspace]
	if !ok {
		d.mu.Unlock()
		return fmt.Errorf("%w: %s on node %s", ErrUnknownJob, req.Nspace, d.cfg.Node)
	}
	var targets []*localProc
	if len(req.Ranks) == 0 {
		targets = slices.Collect(maps.Values(j.procs))
	}
	for _, r := range req.Ranks {
		if lp, ok := j.procs[r]; ok {
			targets = append(targets, lp)
		}
	}
	if req.Signal != 0 {
		d.mu.Unlock()
		return d.signal(targets, syscall.Signal(req.Signal))
	}
	for _, lp := range targets {
		lp.killed = true
		lp.silent = lp.silent || req.Silent
	}
	d.mu.Unlock()
	for _, lp := range targets {
		d.terminate(lp, req.Force)
	}
	if req.Reason != "" {
		d.log.Info("ending processes of a job", "nspace", req.Nspace, "count", len(targets), "reason", req.Reason)
	}
	return nil
}

// terminate sends SIGTERM, then SIGKILL after the kill grace (at once when
// force).
func (d *Daemon) terminate(lp *localProc, force bool) {
	if force {
		_ = lp.p.Kill()
		return
	}
	_ = lp.p.Signal(syscall.SIGTERM)
	d.goFunc(func() {
		t := time.NewTimer(d.cfg.KillGrace)
		defer t.Stop()
		select {
		case <-lp.p.Done():
		case <-t.C:
			_ = lp.p.Kill()
		}
	})
}

// Abort handles a client's PMIx_Abort: the caller is ended at once (its
// end classified PMIX_ERR_PROC_REQUESTED_ABORT), and so are the procs it
// named of its job (all of them when it named none), wherever they run.
// It reports false when the caller is not a process this daemon started;
// the agent then raises the event itself.
func (d *Daemon) Abort(caller pmix.Proc, procs []pmix.Proc) bool {
	d.mu.Lock()
	j, ok := d.jobs[caller.Nspace]
	var lp *localProc
	if ok {
		lp = j.procs[caller.Rank]
	}
	if lp == nil {
		d.mu.Unlock()
		return false
	}
	type where struct {
		cluster cluster.ID
		node    string
	}
	byNode := map[where][]pmix.Rank{}
	all := len(procs) == 0
	for _, p := range procs {
		if p.Nspace == caller.Nspace && p.Rank == pmix.RankWildcard {
			all = true
		}
	}
	for _, pl := range j.req.Map {
		if pl.Rank == caller.Rank {
			continue
		}
		if all || slices.Contains(procs, pmix.Proc{Nspace: caller.Nspace, Rank: pl.Rank}) {
			w := where{d.cfg.Cluster, pl.Node}
			if pl.Cluster != "" {
				w.cluster = pl.Cluster
			}
			byNode[w] = append(byNode[w], pl.Rank)
		}
	}
	d.mu.Unlock()
	_ = lp.p.Kill()
	for w, ranks := range byNode {
		req := KillRequest{Nspace: caller.Nspace, Ranks: ranks, Silent: true, Reason: fmt.Sprintf("%v called abort", caller)}
		if w.cluster == d.cfg.Cluster && w.node == d.cfg.Node {
			_ = d.Kill(req)
			continue
		}
		d.goFunc(func() {
			ctx, cancel := context.WithTimeout(d.ctx, 5*time.Second)
			defer cancel()
			if err := Control(ctx, d.cfg.Conn, w.cluster, w.node, OpKill, req, nil); err != nil && !errors.Is(err, ErrUnknownJob) {
				d.log.Warn("could not end the processes an abort named", "cluster", w.cluster, "node", w.node, "err", err)
			}
		})
	}
	return true
}

// Jobs lists the jobs with ranks on this node and their states.
func (d *Daemon) Jobs() []JobState {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]JobState, 0, len(d.jobs))
	for _, j := range d.jobs {
		out = append(out, j.stateLocked())
	}
	slices.SortFunc(out, func(a, b JobState) int { return strings.Compare(a.Nspace, b.Nspace) })
	return out
}

// Finished lists the jobs whose ranks here all ended within FinishedKeep,
// oldest first.
func (d *Daemon) Finished() []JobState {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.pruneFinishedLocked(time.Now())
	out := make([]JobState, len(d.finished))
	for i, f := range d.finished {
		out[i] = f.state
	}
	return out
}

func (d *Daemon) pruneFinishedLocked(now time.Time) {
	i := 0
	for i < len(d.finished) && now.Sub(d.finished[i].at) > FinishedKeep {
		i++
	}
	d.finished = slices.Delete(d.finished, 0, i)
}

// stateLocked is the job's state here; d.mu held.
func (j *localJob) stateLocked() JobState {
	js := JobState{Nspace: j.req.Nspace, Launcher: j.req.Launcher}
	for _, r := range slices.Sorted(maps.Keys(j.procs)) {
		lp := j.procs[r]
		state := "running"
		if lp.ended != "" {
			state = "ended: " + lp.ended
		}
		js.Ranks = append(js.Ranks, RankState{Rank: r, Pid: lp.p.Pid(), State: state})
		if lp.end != nil {
			js.Ends = append(js.Ends, *lp.end)
		}
	}
	return js
}

// watchLaunchers follows the jobs bucket: when the key of a job with ranks
// here expires (its launcher stopped beating), the job's processes here
// are ended once the grace passes without the key coming back.
func (d *Daemon) watchLaunchers(w natsjs.KeyWatcher) {
	for e := range w.Updates() {
		if e == nil {
			continue
		}
		nspace := subjects.Unescaped(e.Key())
		d.mu.Lock()
		j, ok := d.jobs[nspace]
		if !ok {
			d.mu.Unlock()
			continue
		}
		lost := false
		switch e.Operation() {
		case natsjs.KeyValuePut:
			if j.orphan != nil {
				j.orphan.Stop()
				j.orphan = nil
			}
			var rec JobRecord
			if json.Unmarshal(e.Value(), &rec) == nil && slices.Contains(rec.Lost, d.cfg.Node) && !j.lost {
				j.lost, lost = true, true
			}
		case natsjs.KeyValuePurge, natsjs.KeyValueDelete:
			// Purged: its TTL ran out. Deleted: the launcher released it
			// on leaving, which it does after ending the job's ranks —
			// unless it could not reach this node (cut off), whose ranks
			// would then run for ever.
			if j.orphan == nil {
				grace := d.launcherGrace(j)
				d.log.Warn("the launcher of a job stopped beating; ending its processes unless it comes back", "nspace", nspace, "launcher", j.req.Launcher, "grace", grace)
				j.orphan = time.AfterFunc(grace, func() {
					_ = d.Kill(KillRequest{Nspace: nspace, Silent: true, Reason: "its launcher " + j.req.Launcher + " is gone"})
				})
			}
		}
		d.mu.Unlock()
		if lost {
			// Its ranks went down with this node as the job sees it (the
			// others heard TERM_WO_SYNC for them): ended silently, they
			// never come back into the job.
			d.log.Warn("the launcher declared this node lost while it was cut off from NATS; ending the job's processes here", "nspace", nspace, "launcher", j.req.Launcher)
			go func() {
				_ = d.Kill(KillRequest{Nspace: nspace, Silent: true, Reason: "its node was declared lost by the launcher " + j.req.Launcher})
			}()
		}
	}
}

// Shutdown stops answering requests, ends the processes it started
// (SIGTERM, then SIGKILL after the kill grace; their ends are reported)
// and waits for them within ctx.
//
// Errors: ctx.Err() when the processes did not end in time (they were
// sent SIGKILL).
func (d *Daemon) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	sub := d.sub
	var procs []*localProc
	for _, j := range d.jobs {
		if j.orphan != nil {
			j.orphan.Stop()
		}
		procs = append(procs, slices.Collect(maps.Values(j.procs))...)
	}
	d.mu.Unlock()
	if sub != nil {
		_ = sub.Unsubscribe()
	}
	for _, lp := range procs {
		_ = lp.p.Signal(syscall.SIGTERM)
	}
	var err error
	if !waitAll(ctx, procs, d.cfg.KillGrace) {
		for _, lp := range procs {
			_ = lp.p.Kill()
		}
		if !waitAll(ctx, procs, d.cfg.KillGrace) {
			err = ctx.Err()
		}
	}
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.cancel() // stops the watcher too: it was started with d.ctx
	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	return err
}

// prependPath puts dir first on a search path: the app's own value if it
// set one, else the agent's.
func prependPath(dir, app, agent string) string {
	rest := app
	if rest == "" {
		rest = agent
	}
	if rest == "" {
		return dir
	}
	return dir + ":" + rest
}

// waitAll waits until every proc has been reaped, for at most d and ctx.
func waitAll(ctx context.Context, procs []*localProc, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	for _, lp := range procs {
		select {
		case <-lp.done:
		case <-t.C:
			return false
		case <-ctx.Done():
			return false
		}
	}
	return true
}

// resolveProgram finds app's program as exec would, and checks that it
// is an executable file.
func resolveProgram(app App) (string, error) {
	p := app.Path
	if !strings.Contains(p, "/") {
		return exec.LookPath(p)
	}
	if !filepath.IsAbs(p) && app.Dir != "" {
		p = filepath.Join(app.Dir, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return "", err
	}
	if fi.IsDir() {
		return "", errors.New("is a directory")
	}
	if fi.Mode().Perm()&0o111 == 0 {
		return "", errors.New("permission denied: not executable")
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return abs, nil
}
