package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/launch/liveness"
	"github.com/pmixbus/pmixbus/pmix"
)

// PMIx_Spawn: a process of a job asks its agent to start a new job; the
// agent sends the request to the job's launcher, which places and starts
// the new job as it started its own (the same placement, the same agents'
// spawn requests, the same output display and end reports), and answers
// with the new nspace. As in PRRTE, where the spawn goes to the HNP: the
// launcher is the one that holds the job's output and policy. A job whose
// launcher is gone, or that no launcher started (a host RM's), cannot
// spawn: the request gets PMIX_ERR_NOT_SUPPORTED or PMIX_ERR_UNREACH.

// ChildOp is the last token of the subject where a job's launcher takes
// its processes' spawn requests: pmix.jobstate.<cluster>.<nspace>.spawn.
const ChildOp = "spawn"

// MaxSpawnRanks bounds the ranks of one spawn, all apps together: a job
// map of that many fits a control request (MaxRequest).
const MaxSpawnRanks = 1 << 20

// DefaultChildTimeout bounds the wait for a spawn's answer, unless the
// request names PMIX_TIMEOUT: placing, claiming and starting on every
// agent, each of which has SpawnTimeout.
const DefaultChildTimeout = 90 * time.Second

// ChildSubject is where the launcher of nspace takes the spawn requests of
// its processes on cluster c.
func ChildSubject(c cluster.ID, nspace string) string {
	return StateSubject(c, nspace) + "." + ChildOp
}

// SpawnApp is one app context of PMIx_Spawn (pmix_app_t) as a client sends
// it: Argv[0] is the program's name as the app wants it (not looked up).
type SpawnApp struct {
	Cmd      string
	Argv     []string
	Env      []string // "NAME=value"
	Dir      string
	MaxProcs int
	Info     []pmix.Info
}

// ChildRequest asks the launcher of Parent's job to start a new job.
type ChildRequest struct {
	Version string       `json:"version"`
	Parent  pmix.Proc    `json:"parent"`
	Apps    []ChildApp   `json:"apps"`
	Timeout Milliseconds `json:"timeout_ms,omitempty"`
}

// Milliseconds is a duration on the wire.
type Milliseconds int64

// ChildApp is one app context of a ChildRequest, its directives parsed.
type ChildApp struct {
	// Cluster runs the app; empty: the parent's agent's.
	Cluster       cluster.ID `json:"cluster,omitempty"`
	N             int        `json:"n"`
	Hosts         []Node     `json:"hosts,omitempty"`
	MapBy         string     `json:"map_by,omitempty"`
	Oversubscribe bool       `json:"oversubscribe,omitempty"`
	// NoOversubscribe refuses oversubscription even when the parent's
	// app context allowed it (which the spawned job inherits otherwise,
	// as mpirun's --oversubscribe holds for the jobs its ranks spawn).
	NoOversubscribe bool `json:"no_oversubscribe,omitempty"`
	App             App  `json:"app"`
}

// ChildReply answers a ChildRequest: the new job's nspace and job-level
// info (msgpack, pmix.MarshalInfos: its size, its parent…), or the error.
type ChildReply struct {
	Nspace string `json:"nspace,omitempty"`
	Info   []byte `json:"info,omitempty"`
	Error
}

// maxSpawnedJobs bounds the job-level info a SpawnedJobs keeps.
const maxSpawnedJobs = 256

// SpawnedJobs keeps the job-level info of the last jobs a node's clients
// spawned, so that a parent whose agent runs none of the new job's ranks
// can still Get its size at rank WILDCARD (what OpenPMIx's dynamic.c
// does right after PMIx_Spawn). The zero value is ready; safe for
// concurrent use.
type SpawnedJobs struct {
	mu    sync.Mutex
	order []string
	info  map[string][]pmix.Info
}

// Add keeps nspace's info, forgetting the oldest past maxSpawnedJobs.
func (s *SpawnedJobs) Add(nspace string, info []pmix.Info) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.info == nil {
		s.info = map[string][]pmix.Info{}
	}
	if _, ok := s.info[nspace]; !ok {
		s.order = append(s.order, nspace)
	}
	s.info[nspace] = info
	for len(s.order) > maxSpawnedJobs {
		delete(s.info, s.order[0])
		s.order = s.order[1:]
	}
}

// Info is nspace's job-level info, if a client here spawned it lately.
func (s *SpawnedJobs) Info(nspace string) ([]pmix.Info, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	info, ok := s.info[nspace]
	return info, ok
}

// ParseSpawn turns PMIx_Spawn's job info and apps into a request of
// parent's, read as PRRTE reads them: PMIX_HOST (prterun's --host form),
// PMIX_HOSTFILE (read here, on the caller's node), PMIX_MAPBY (Open MPI's
// and prterun's policies as `pmixbus run --map-by`), PMIX_NO_OVERSUBSCRIBE
// false… and PMIX_WDIR, in an app's info or for every app in the job
// info; PMIXBUS_SPAWN_CLUSTER names the cluster (pmixbus's own). Other
// directives are advisory in PMIx and ignored; an app without a working
// directory runs in the caller's agent's. Each app's MaxProcs is its
// number of ranks.
//
// Errors: pmix.ErrBadParam naming the app and the directive at fault;
// ErrPlacement for a policy pmixbus does not map by.
func ParseSpawn(parent pmix.Proc, jobInfo []pmix.Info, apps []SpawnApp) (ChildRequest, error) {
	req := ChildRequest{Parent: parent}
	if len(apps) == 0 {
		return req, pmix.Errorf(pmix.ErrBadParam, "spawn of no app")
	}
	var job ChildApp
	total := 0
	if err := applyDirectives(&job, jobInfo, "the job info", &req); err != nil {
		return req, err
	}
	for i, a := range apps {
		what := fmt.Sprintf("app %d", i)
		if a.Cmd == "" {
			return req, pmix.Errorf(pmix.ErrBadParam, "%s: no command", what)
		}
		if a.MaxProcs <= 0 {
			return req, pmix.Errorf(pmix.ErrBadParam, "%s (%s): maxprocs %d: at least 1", what, a.Cmd, a.MaxProcs)
		}
		if total += a.MaxProcs; total > MaxSpawnRanks {
			return req, pmix.Errorf(pmix.ErrBadParam, "%s (%s): the spawn asks for more than %d ranks", what, a.Cmd, MaxSpawnRanks)
		}
		c := job
		c.Hosts = append([]Node(nil), job.Hosts...)
		c.N = a.MaxProcs
		c.App = App{Path: a.Cmd, Dir: job.App.Dir}
		if len(a.Argv) > 1 {
			c.App.Args = append([]string(nil), a.Argv[1:]...)
		}
		if a.Dir != "" {
			c.App.Dir = a.Dir
		}
		for _, kv := range a.Env {
			k, v, ok := strings.Cut(kv, "=")
			if !ok || k == "" {
				return req, pmix.Errorf(pmix.ErrBadParam, "%s: environment entry %s is not NAME=value", what, pmix.Quote(kv))
			}
			if c.App.Env == nil {
				c.App.Env = map[string]string{}
			}
			c.App.Env[k] = v
		}
		if err := applyDirectives(&c, a.Info, what, nil); err != nil {
			return req, err
		}
		req.Apps = append(req.Apps, c)
	}
	return req, nil
}

// applyDirectives sets what info says of app; the timeout only from the
// job info (req non-nil).
func applyDirectives(app *ChildApp, info []pmix.Info, what string, req *ChildRequest) error {
	str := func(in pmix.Info) (string, error) {
		s, ok := in.Value.Str()
		if !ok {
			return "", pmix.Errorf(pmix.ErrBadParam, "%s: %s is %v, not a string", what, in.Key, in.Value)
		}
		return s, nil
	}
	for _, in := range info {
		switch in.Key {
		case pmix.KeyHost:
			s, err := str(in)
			if err != nil {
				return err
			}
			hosts, err := ParseHosts(s)
			if err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "%s: %s: %v", what, in.Key, pmix.MessageOf(err))
			}
			app.Hosts = hosts
		case pmix.KeyHostfile:
			s, err := str(in)
			if err != nil {
				return err
			}
			f, err := os.Open(s)
			if err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "%s: %s: %v", what, in.Key, err)
			}
			hosts, err := ParseHostfile(f)
			_ = f.Close()
			if err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "%s: %s %s: %v", what, in.Key, s, pmix.MessageOf(err))
			}
			if len(app.Hosts) == 0 {
				app.Hosts = hosts // PMIX_HOST, when given too, restricts to its hosts
			}
		case pmix.KeyMapBy:
			s, err := str(in)
			if err != nil {
				return err
			}
			policy, over, err := ParseMapBy(s)
			if err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "%s: %s: %v", what, in.Key, pmix.MessageOf(err))
			}
			app.MapBy = policy
			if over != nil {
				app.Oversubscribe, app.NoOversubscribe = *over, !*over
			}
		case pmix.KeyNoOver:
			if b, ok := in.Value.Bool(); ok {
				app.Oversubscribe, app.NoOversubscribe = !b, b
			}
		case pmix.KeyWdir:
			s, err := str(in)
			if err != nil {
				return err
			}
			app.App.Dir = s
		case pmix.KeySpawnCluster:
			s, err := str(in)
			if err != nil {
				return err
			}
			c := cluster.ID(s)
			if err := c.Validate(); err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "%s: %s: %v", what, in.Key, pmix.MessageOf(err))
			}
			app.Cluster = c
		case pmix.KeyTimeout:
			if req == nil {
				continue
			}
			n, ok := in.Value.Int()
			if !ok || n < 0 {
				return pmix.Errorf(pmix.ErrBadParam, "%s: %s is %v, not a number of seconds", what, in.Key, in.Value)
			}
			req.Timeout = Milliseconds(n * 1000)
		}
	}
	return nil
}

// RequestChild sends req to the launcher of req.Parent's job, through the
// server nc is connected to (of cluster c, where the parent runs), and
// returns the new job's nspace and job-level info once every one of its
// ranks has started.
//
// Errors: pmix.ErrNotSupported when no launcher takes the job's spawn
// requests (a host RM's job, or its launcher is gone); pmix.ErrTimeout;
// what the launcher answered: ErrPlacement, ErrNoProgram, ErrNoAgent,
// ErrNspaceTaken… with their PMIx statuses.
func RequestChild(ctx context.Context, nc *nats.Conn, c cluster.ID, req ChildRequest) (string, []pmix.Info, error) {
	timeout := time.Duration(req.Timeout) * time.Millisecond
	if timeout <= 0 {
		timeout = DefaultChildTimeout
	}
	if req.Version == "" {
		req.Version = liveness.ModuleVersion()
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", nil, pmix.Errorf(pmix.ErrPackFailure, "spawn request: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	m, err := nc.RequestWithContext(ctx, ChildSubject(c, req.Parent.Nspace), body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return "", nil, pmix.Errorf(pmix.ErrNotSupported, "no launcher takes the spawn requests of job %s on cluster %s: a job pmixbus run did not start (or whose launcher is gone) cannot spawn", req.Parent.Nspace, c)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout):
		return "", nil, pmix.Errorf(pmix.ErrTimeout, "the launcher of job %s did not answer the spawn request within %v", req.Parent.Nspace, timeout)
	case err != nil:
		return "", nil, pmix.Errorf(pmix.ErrUnreach, "spawn request to the launcher of job %s: %v", req.Parent.Nspace, err)
	}
	var reply ChildReply
	if err := decode(m.Data, &reply); err != nil {
		return "", nil, err
	}
	if err := reply.Err(); err != nil {
		return "", nil, err
	}
	if reply.Nspace == "" {
		return "", nil, pmix.Errorf(pmix.ErrGeneral, "the launcher of job %s answered the spawn without an nspace", req.Parent.Nspace)
	}
	info, err := pmix.UnmarshalInfos(reply.Info)
	if err != nil {
		return "", nil, pmix.Errorf(pmix.ErrUnpackFailure, "the job info of spawned job %s: %v", reply.Nspace, err)
	}
	return reply.Nspace, info, nil
}

// subscribeChildren takes the spawn requests of the run's processes, in
// every cluster the job runs on.
func (r *Run) subscribeChildren() error {
	for _, j := range r.jobs {
		subj := ChildSubject(j.cluster, j.nspace)
		sub, err := r.cfg.Conn.Subscribe(subj, r.onChild)
		if err != nil {
			return pmix.Errorf(pmix.ErrUnreach, "subscribing to %s: %v", subj, err)
		}
		r.subs = append(r.subs, sub)
	}
	return nil
}

// onChild launches the job a process of the run asked for, and answers
// with its nspace or why it failed. Requests are taken one at a time per
// cluster, as PRRTE's state machine takes them.
func (r *Run) onChild(m *nats.Msg) {
	var req ChildRequest
	reply := func(child *Run, err error) {
		var r ChildReply
		if child != nil {
			r.Nspace, r.Info = child.nspace, child.jobInfo
		}
		r.Error = errorOf(err)
		body, eerr := json.Marshal(r)
		if eerr == nil && m.Reply != "" {
			_ = m.Respond(body)
		}
	}
	if err := decode(m.Data, &req); err != nil {
		reply(nil, err)
		return
	}
	if req.Parent.Nspace != r.nspace || int64(req.Parent.Rank) >= int64(len(r.places)) {
		reply(nil, pmix.Errorf(pmix.ErrBadParam, "spawn request from %v, not a process of job %s", req.Parent, r.nspace))
		return
	}
	if req.Version != r.cfg.Version {
		reply(nil, fmt.Errorf("%w: the spawn request is of version %s, the launcher %s", ErrVersion, req.Version, r.cfg.Version))
		return
	}
	r.mu.Lock()
	if r.childrenClosed {
		r.mu.Unlock()
		reply(nil, pmix.Errorf(pmix.ErrInvalidOperation, "job %s has ended: its launcher spawns no more", r.nspace))
		return
	}
	r.spawning.Add(1)
	r.mu.Unlock()
	defer r.spawning.Done()
	child, err := r.launchChild(req)
	if err != nil {
		reply(nil, err)
		// Shown as mpirun shows a spawn that failed to start.
		fmt.Fprintf(r.cfg.Stderr, "pmixbus run: the spawn of %s failed: %v\n", req.Parent, pmix.MessageOf(err))
		r.childFailed(req.Parent, err)
		return
	}
	r.log.Info("spawned a job", "parent", req.Parent.String(), "nspace", child.nspace, "ranks", len(child.places))
	reply(child, nil)
}

// childFailed raises PMIX_ERR_JOB_FAILED_TO_LAUNCH to the parent's job
// (range NAMESPACE, in every cluster it runs on), the caller as the
// affected proc and the error as its text: the caller has its reply, but
// its peers may be waiting for it elsewhere — Open MPI 4.1.4's parents
// other than the spawn's root wait in a broadcast the root never joins
// when its spawn fails; the event reaches their default handler, which
// aborts them, as mpirun ends a job whose spawn failed.
func (r *Run) childFailed(parent pmix.Proc, err error) {
	for _, j := range r.jobs {
		r.raise(j.cluster, fmt.Sprintf("spawnfail.%s.%s.%d.%d", j.cluster, r.nspace, parent.Rank, time.Now().UnixNano()), pmix.ErrJobFailedToLaunch, []pmix.Info{
			pmix.NewInfo(pmix.KeyEventAffectedProc, pmix.ProcValue(parent)),
			pmix.NewInfo(pmix.KeyNspace, pmix.String(r.nspace)),
			pmix.NewInfo(pmix.KeyEventTextMessage, pmix.String("spawn by "+parent.String()+" failed: "+pmix.MessageOf(err))),
		}, "a failed spawn")
	}
}

// launchChild launches req's job with the run's settings: its output
// shown as the run's, its policy the run's.
func (r *Run) launchChild(req ChildRequest) (*Run, error) {
	if len(req.Apps) == 0 {
		return nil, pmix.Errorf(pmix.ErrBadParam, "spawn of no app")
	}
	total := 0
	for _, a := range req.Apps {
		if total += a.N; a.N <= 0 || total > MaxSpawnRanks {
			return nil, pmix.Errorf(pmix.ErrBadParam, "spawn of %d ranks in an app, or more than %d in all", a.N, MaxSpawnRanks)
		}
	}
	cfg := r.cfg
	cfg.Jobs = nil
	cfg.Stdin = Stdin{}
	cfg.Started = nil
	cfg.Help = nil // shown as they come: the run's aggregator is the run's to close
	info := []pmix.Info{
		pmix.NewInfo(pmix.KeyParentID, pmix.ProcValue(req.Parent)),
		pmix.NewInfo(pmix.KeySpawned, pmix.Bool(true)),
	}
	for i, a := range req.Apps {
		spec := JobSpec{Cluster: a.Cluster, N: a.N, Hosts: a.Hosts, MapBy: a.MapBy, Oversubscribe: a.Oversubscribe, App: a.App, Session: r.session}
		pl := r.places[req.Parent.Rank]
		if spec.Cluster == "" {
			spec.Cluster = pl.Cluster
		}
		own := r.cfg.Jobs[pl.App]
		spec.Oversubscribe = a.Oversubscribe || (own.Oversubscribe && !a.NoOversubscribe)
		if len(spec.Hosts) == 0 && spec.Cluster == pl.Cluster {
			spec.Hosts = own.Hosts // mpirun -H holds for the jobs its ranks spawn
		}
		if i == 0 {
			spec.Info = info
		}
		cfg.Jobs = append(cfg.Jobs, spec)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.SpawnTimeout+10*time.Second)
	defer cancel()
	child, err := Launch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.children = append(r.children, child)
	r.mu.Unlock()
	return child, nil
}

// childOf is the run's spawned job of nspace, nil if none (or the run's own).
func (r *Run) childOf(nspace string) *Run {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.children {
		if c.nspace == nspace {
			return c
		}
	}
	return nil
}

// awaitChildren takes no more spawn requests, waits for those in flight,
// then for every spawned job to end.
func (r *Run) awaitChildren() {
	r.mu.Lock()
	r.childrenClosed = true
	r.mu.Unlock()
	r.spawning.Wait()
	r.mu.Lock()
	children := append([]*Run(nil), r.children...)
	r.mu.Unlock()
	for _, c := range children {
		<-c.Done()
	}
}

// withChildren folds the spawned jobs' results into res: each job's
// result after the run's, and the first failure's exit code when the
// run's own ranks all exited 0.
func (r *Run) withChildren(ctx context.Context, res Result) (Result, error) {
	r.mu.Lock()
	children := append([]*Run(nil), r.children...)
	r.mu.Unlock()
	for _, c := range children {
		cres, err := c.Wait(ctx)
		if err != nil {
			return Result{}, err
		}
		res.Jobs = append(res.Jobs, cres.Jobs...)
		if res.ExitCode == 0 && cres.ExitCode != 0 {
			res.ExitCode, res.First, res.NodeLost = cres.ExitCode, cres.First, cres.NodeLost
		}
	}
	return res, nil
}

// lockedWriter serializes the writes of a run and of the jobs its
// processes spawn, whose follow loops share the run's writers.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// lockWriters wraps stdout and stderr in lockedWriters, one for both when
// they are the same writer; a spawned job's config has them wrapped
// already.
func lockWriters(stdout, stderr io.Writer) (io.Writer, io.Writer) {
	if _, ok := stdout.(*lockedWriter); ok {
		return stdout, stderr
	}
	out := &lockedWriter{w: stdout}
	if t := reflect.TypeOf(stdout); t == reflect.TypeOf(stderr) && t.Comparable() && stderr == stdout {
		return out, out
	}
	return out, &lockedWriter{w: stderr}
}
