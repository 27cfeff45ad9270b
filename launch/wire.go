package launch

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Subjects of the launch service (docs/subjects.md). The control
// subjects are request/reply; an agent answers those of its own node.
const (
	// ControlPrefix roots the control requests to agents:
	// pmix.ctl.<cluster>.<node>.<op>.
	ControlPrefix = "pmix.ctl"
	// StatePrefix roots the reports of a job's processes to its launcher:
	// pmix.jobstate.<cluster>.<nspace>.
	StatePrefix = "pmix.jobstate"
)

// Control operations.
const (
	OpSpawn = "spawn" // SpawnRequest → SpawnReply
	OpKill  = "kill"  // KillRequest → Reply
	OpJobs  = "jobs"  // no body → JobsReply
	OpStdin = "stdin" // StdinRequest → StdinReply
)

// MaxRequest bounds a control request's body: a job map of a million
// ranks fits.
const MaxRequest = 64 << 20

// ControlSubject is where node's agent of cluster c takes op.
func ControlSubject(c cluster.ID, node, op string) string {
	return ControlPrefix + "." + subjects.EscapeToken(string(c)) + "." + subjects.EscapeToken(node) + "." + op
}

// JobControlSubject is where node's agent of cluster c takes op for
// nspace's job: the control subject, then the job's nspace. The ops that
// act on one job (spawn, kill, stdin) go there, so that what a launcher
// signed in for one job may request is that job's (security.JobPermissions):
// the agent refuses one whose body names another job.
func JobControlSubject(c cluster.ID, node, op, nspace string) string {
	return ControlSubject(c, node, op) + "." + subjects.EscapeToken(nspace)
}

// jobOp reports whether op acts on one job, named in its subject.
func jobOp(op string) bool { return op == OpSpawn || op == OpKill || op == OpStdin }

// jobRequest is a control request for one job.
type jobRequest interface{ jobNspace() string }

func (r SpawnRequest) jobNspace() string { return r.Nspace }
func (r KillRequest) jobNspace() string  { return r.Nspace }
func (r StdinRequest) jobNspace() string { return r.Nspace }

// controlSubjectOf is where op with body req goes.
func controlSubjectOf(c cluster.ID, node, op string, req any) string {
	if jr, ok := req.(jobRequest); ok && jobOp(op) {
		return JobControlSubject(c, node, op, jr.jobNspace())
	}
	return ControlSubject(c, node, op)
}

// StateSubject is where the agents report the ends of nspace's processes.
func StateSubject(c cluster.ID, nspace string) string {
	return StatePrefix + "." + subjects.EscapeToken(string(c)) + "." + subjects.EscapeToken(nspace)
}

// App is what each rank of a job runs.
type App struct {
	// Path is the program: absolute, relative to Dir, or a name looked up
	// in the agent's PATH.
	Path string            `json:"path"`
	Args []string          `json:"args,omitempty"`
	Env  map[string]string `json:"env,omitempty"`
	// Dir is the working directory; empty means the agent's.
	Dir string `json:"dir,omitempty"`
}

// Placement is one rank of a job map.
type Placement struct {
	Rank pmix.Rank `json:"rank"`
	Node string    `json:"node"`
	// App is the index of the app context the rank runs (SpawnRequest.Apps).
	App int `json:"app,omitempty"`
	// Cluster is the node's cluster: a job's app contexts may run on
	// several (one job across clusters). Empty: the cluster of the agent
	// the request went to.
	Cluster cluster.ID `json:"cluster,omitempty"`
}

// SpawnRequest asks an agent to start its ranks of a job. Every agent of
// the job gets the whole map (CUSTOM-range events, job-level info) and
// starts the ranks the map places on its node, each running its app
// context: an MPMD job (`-n 2 ./a : -n 2 ./b`) is one job, its ranks
// numbered across the app contexts in order.
type SpawnRequest struct {
	// Version is the launcher's; an agent of another version refuses.
	Version string `json:"version"`
	Nspace  string `json:"nspace"`
	Session string `json:"session,omitempty"`
	// Launcher names who launched the job (host:pid), for status.
	Launcher string      `json:"launcher"`
	Map      []Placement `json:"map"`
	// Apps are the job's app contexts; Placement.App indexes them, each
	// app's ranks following the previous app's.
	Apps []App `json:"apps"`
	// Info is job-level info (msgpack, pmix.MarshalInfos) the job's
	// clients get at attach and by Get.
	Info []byte `json:"info,omitempty"`
	// Continuous keeps the job running when a process ends abnormally.
	Continuous bool `json:"continuous,omitempty"`
	// NotifyTermination raises PMIX_EVENT_PROC_TERMINATED for normal
	// exits too.
	NotifyTermination bool `json:"notify_termination,omitempty"`
	// LauncherGraceMS is how long the agents wait, once the launcher's
	// key expired, before they end the job's processes.
	LauncherGraceMS int64 `json:"launcher_grace_ms,omitempty"`
	// Output is how the agents capture the ranks' output (package iof).
	Output OutputSpec `json:"output,omitzero"`
	// Stdin names the ranks whose standard input is a pipe fed through
	// OpStdin (--stdin): one rank, or pmix.RankWildcard for all. Nil: none,
	// every rank reads the null device.
	Stdin *pmix.Rank `json:"stdin,omitempty"`
	// OutputToken, if set, is the secret with which the launcher attaches
	// to the agent's socket for the job's output when it runs on the
	// agent's node (direct.go); at most MaxOutputToken bytes.
	OutputToken string `json:"output_token,omitempty"`
}

// MaxOutputToken bounds a spawn request's output token.
const MaxOutputToken = 128

// OutputSpec is a job's output capture: PMIX_IOF_OUTPUT_RAW, and the bytes
// per channel the job's stream keeps (PMIX_IOF_CACHE_SIZE, 0 for the
// default) with what goes beyond (PMIX_IOF_DROP_OLDEST, else NEWEST).
type OutputSpec struct {
	Raw        bool  `json:"raw,omitempty"`
	Limit      int64 `json:"limit,omitempty"`
	DropOldest bool  `json:"drop_oldest,omitempty"`
}

// SpawnReply answers a SpawnRequest.
type SpawnReply struct {
	Node string `json:"node"`
	// Pids of the ranks started, by rank.
	Pids map[pmix.Rank]int `json:"pids,omitempty"`
	Error
}

// KillRequest asks an agent to end processes of a job.
type KillRequest struct {
	Nspace string      `json:"nspace"`
	Ranks  []pmix.Rank `json:"ranks,omitempty"` // none: all of the job's on the node
	// Force sends SIGKILL at once; otherwise SIGTERM, then SIGKILL after
	// the agent's kill grace.
	Force bool `json:"force,omitempty"`
	// Silent ends them as part of ending the job (an abort, a cancel):
	// no per-process event is raised.
	Silent bool   `json:"silent,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Signal, when set, sends the ranks that signal and nothing else
	// (PMIx_Job_control's PMIX_JOB_CTRL_SIGNAL, _PAUSE, _RESUME): they
	// are not marked killed, and Force and Silent do not apply.
	Signal int `json:"signal,omitempty"`
}

// StdinRequest delivers bytes to the standard input of ranks of a job on
// the agent's node (launch/stdin.go has the flow control). A writer (the
// launcher, a client's agent) numbers its bytes: Offset is where Data
// starts in its stream, so a request sent again after a lost reply is
// queued once.
type StdinRequest struct {
	Nspace string `json:"nspace"`
	// Ranks to deliver to; pmix.RankWildcard: every rank of the job on
	// the node whose stdin is forwarded. A rank the node does not run is
	// left out of the reply's Held, not an error.
	Ranks  []pmix.Rank `json:"ranks"`
	Writer string      `json:"writer"`
	Offset int64       `json:"offset"`
	// Data is at most MaxStdinData bytes.
	Data []byte `json:"data,omitempty"`
	// EOF closes the ranks' stdin once Data is written (PMIX_IOF_COMPLETE).
	EOF bool `json:"eof,omitempty"`
}

// StdinReply answers a StdinRequest. Its error is ErrStdinFull
// (PMIX_ERR_IOF_XOFF) when a rank's queue had no room within StdinHold:
// nothing was queued, the writer sends the same request again.
type StdinReply struct {
	// Held are the ranks of the request the node runs; Closed those of
	// them whose stdin is closed (the process ended, stopped reading, or
	// got EOF): nothing more is delivered to them, the writer drops them.
	Held   []pmix.Rank `json:"held,omitempty"`
	Closed []pmix.Rank `json:"closed,omitempty"`
	Error
}

// Reply answers a request that returns nothing else.
type Reply struct {
	Error
}

// Error is a failed request's status, as a reply carries it.
type Error struct {
	Status  pmix.Status `json:"status,omitempty"`
	Code    string      `json:"code,omitempty"`
	Message string      `json:"message,omitempty"`
}

// Err is the error the reply carries, or nil.
func (e Error) Err() error {
	if e.Status == pmix.Success && e.Message == "" {
		return nil
	}
	st := e.Status
	if st == pmix.Success {
		st = pmix.ErrGeneral
	}
	return pmix.NewCodedError(st, e.Code, e.Message)
}

// errorOf is the reply form of err.
func errorOf(err error) Error {
	if err == nil {
		return Error{}
	}
	return Error{Status: pmix.StatusOf(err), Code: pmix.CodeOf(err), Message: pmix.MessageOf(err)}
}

// ProcEnd reports how one process of a job ended.
type ProcEnd struct {
	Nspace string    `json:"nspace"`
	Rank   pmix.Rank `json:"rank"`
	Node   string    `json:"node"`
	// App is the rank's app context, Cluster its node's cluster.
	App     int        `json:"app,omitempty"`
	Cluster cluster.ID `json:"cluster,omitempty"`
	Pid     int        `json:"pid,omitempty"`
	// State classifies the end (Classify): pmix.Success for a normal
	// exit, else the code of the event raised for it.
	State pmix.Status `json:"state"`
	// ExitCode is the process's exit code, 128+signal when a signal
	// ended it.
	ExitCode int    `json:"exit_code"`
	Signal   int    `json:"signal,omitempty"`
	Text     string `json:"text,omitempty"`
}

// Abnormal reports whether the end counts against the job (its policy
// aborts it): a process killed on request does not.
func (e ProcEnd) Abnormal() bool {
	return e.State != pmix.Success && e.State != pmix.EventProcTerminated && e.State != pmix.ErrProcKilledByCmd
}

// JobsReply lists an agent's jobs, for status, and for a launcher that
// may have missed a process's end report.
type JobsReply struct {
	Node string     `json:"node"`
	Jobs []JobState `json:"jobs"`
	// Finished are the jobs whose ranks here all ended in the last
	// FinishedKeep (at most MaxFinished of them), with their ends: a
	// report published while its launcher's connection was down is not
	// lost.
	Finished []JobState `json:"finished,omitempty"`
}

// JobState is one job as an agent sees it.
type JobState struct {
	Nspace   string      `json:"nspace"`
	Launcher string      `json:"launcher,omitempty"`
	Ranks    []RankState `json:"ranks"`
	// Ends are the end reports of the job's ranks here that ended, as
	// they were sent to the launcher.
	Ends []ProcEnd `json:"ends,omitempty"`
}

// FinishedKeep is how long an agent keeps the ends of a job whose ranks
// on its node all ended, and MaxFinished how many such jobs at most.
const (
	FinishedKeep = 2 * time.Minute
	MaxFinished  = 1024
)

// RankState is one local rank of a job.
type RankState struct {
	Rank  pmix.Rank `json:"rank"`
	Pid   int       `json:"pid"`
	State string    `json:"state"` // "running", "ended: …"
}

// decode parses a request or reply body, refusing one over MaxRequest.
func decode(b []byte, v any) error {
	if len(b) > MaxRequest {
		return pmix.Errorf(pmix.ErrBadParam, "launch message of %d bytes: at most %d", len(b), MaxRequest)
	}
	if err := json.Unmarshal(b, v); err != nil {
		return pmix.Errorf(pmix.ErrBadParam, "launch message: %v", err)
	}
	return nil
}

// check validates a spawn request from NATS: every name a subject token
// can carry, a map of valid ranks 0..n-1 each placed once, each app's
// ranks after the previous app's, a program for each.
func (r *SpawnRequest) check() error {
	if r.Nspace == "" || len(r.Nspace) > pmix.MaxNspaceLen {
		return pmix.Errorf(pmix.ErrBadParam, "nspace %s: %d bytes, want 1 to %d", pmix.Quote(r.Nspace), len(r.Nspace), pmix.MaxNspaceLen)
	}
	if err := subjects.CheckName("session", r.Session); err != nil {
		return err
	}
	if len(r.OutputToken) > MaxOutputToken {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: an output token of %d bytes, at most %d", r.Nspace, len(r.OutputToken), MaxOutputToken)
	}
	if len(r.Map) == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: an empty job map", r.Nspace)
	}
	if len(r.Apps) == 0 {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: no app context", r.Nspace)
	}
	if len(r.Apps) > len(r.Map) {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: %d app contexts for %d ranks", r.Nspace, len(r.Apps), len(r.Map))
	}
	seen := make([]bool, len(r.Map))
	appOf := make([]int, len(r.Map))
	for _, p := range r.Map {
		if !p.Rank.Valid() || int64(p.Rank) >= int64(len(r.Map)) {
			return pmix.Errorf(pmix.ErrBadParam, "job %s: rank %v outside 0..%d", r.Nspace, p.Rank, len(r.Map)-1)
		}
		if seen[p.Rank] {
			return pmix.Errorf(pmix.ErrBadParam, "job %s: rank %v placed twice", r.Nspace, p.Rank)
		}
		seen[p.Rank] = true
		if p.Node == "" || len(p.Node) > subjects.MaxNameLen {
			return pmix.Errorf(pmix.ErrBadParam, "job %s: rank %v on node %s", r.Nspace, p.Rank, pmix.Quote(p.Node))
		}
		if p.App < 0 || p.App >= len(r.Apps) {
			return pmix.Errorf(pmix.ErrBadParam, "job %s: rank %v runs app %d of %d", r.Nspace, p.Rank, p.App, len(r.Apps))
		}
		if p.Cluster != "" {
			if err := p.Cluster.Validate(); err != nil {
				return pmix.Errorf(pmix.ErrBadParam, "job %s: rank %v: %v", r.Nspace, p.Rank, err)
			}
		}
		appOf[p.Rank] = p.App
	}
	for i := 1; i < len(appOf); i++ {
		if appOf[i] != appOf[i-1] && appOf[i] != appOf[i-1]+1 {
			return pmix.Errorf(pmix.ErrBadParam, "job %s: rank %d runs app %d after rank %d's app %d: each app's ranks follow the previous app's", r.Nspace, i, appOf[i], i-1, appOf[i-1])
		}
	}
	if appOf[0] != 0 || appOf[len(appOf)-1] != len(r.Apps)-1 {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: an app context without ranks", r.Nspace)
	}
	for i, app := range r.Apps {
		if err := r.checkApp(i, app); err != nil {
			return err
		}
	}
	if r.Stdin != nil && *r.Stdin != pmix.RankWildcard && int64(*r.Stdin) >= int64(len(r.Map)) {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: stdin to rank %v outside 0..%d", r.Nspace, *r.Stdin, len(r.Map)-1)
	}
	if r.Output.Limit < 0 || r.Output.Limit > iof.MaxLimit {
		return pmix.Errorf(pmix.ErrBadParam, "job %s: output limit %d bytes, want 0 (the default) to %d", r.Nspace, r.Output.Limit, iof.MaxLimit)
	}
	return nil
}

// checkApp checks app context i of the request.
func (r *SpawnRequest) checkApp(i int, app App) error {
	if app.Path == "" {
		return pmix.Errorf(pmix.ErrBadParam, "job %s, app %d: no program", r.Nspace, i)
	}
	for k := range app.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return pmix.Errorf(pmix.ErrBadParam, "job %s, app %d: environment variable name %s", r.Nspace, i, pmix.Quote(k))
		}
	}
	if app.Dir != "" && !filepath.IsAbs(app.Dir) {
		return pmix.Errorf(pmix.ErrBadParam, "job %s, app %d: working directory %s is not absolute", r.Nspace, i, pmix.Quote(app.Dir))
	}
	return nil
}

// local reports whether p is on node of cluster c.
func (p Placement) local(c cluster.ID, node string) bool {
	return p.Node == node && (p.Cluster == "" || p.Cluster == c)
}

// ranksOn returns the ranks the map places on node of cluster c,
// ascending.
func ranksOn(m []Placement, c cluster.ID, node string) []pmix.Rank {
	var out []pmix.Rank
	for _, p := range m {
		if p.local(c, node) {
			out = append(out, p.Rank)
		}
	}
	slices.Sort(out)
	return out
}

// FormatRanks writes ranks compactly, sorted: "0-3,8,10-11".
func FormatRanks(ranks []pmix.Rank) string {
	rs := slices.Clone(ranks)
	slices.Sort(rs)
	var b strings.Builder
	for i := 0; i < len(rs); {
		j := i
		for j+1 < len(rs) && rs[j+1] == rs[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatUint(uint64(rs[i]), 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatUint(uint64(rs[j]), 10))
		}
		i = j + 1
	}
	return b.String()
}
