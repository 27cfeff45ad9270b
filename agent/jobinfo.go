package agent

import (
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/pmix"
)

// The job-level and proc-level info a PMIx program reads with PMIx_Get,
// computed from the job map the host registered (Job.Procs), so that a
// host that gives only the map — "pmixbus run" among them — need give
// nothing else. docs/protocol.md ("Job-level info") states the same
// rules for clients:
//
//   - job size, pmix.job.size (uint32): the number of procs in the map;
//   - universe size, pmix.univ.size (uint32): the job size;
//   - maximum procs, pmix.max.size (uint32): the job size (Open MPI 4.1
//     fails its MPI_Init without it);
//   - the job's applications (MPMD: Job.Apps, ranks numbered across them
//     in order; a job registered without Apps is one app of every rank):
//     pmix.job.napps (uint32), their number; and of the app a rank runs —
//     app number, pmix.appnum (uint32, from 0), app size, pmix.app.size
//     (uint32), app leader, pmix.aldr (Rank: its lowest rank), its
//     command line, pmix.app.argv (string, joined by spaces; only when
//     the host gave it), and the rank within it, pmix.apprank (Rank, of
//     one process). Asked with RankWildcard they are of the asking
//     client's app, as OpenPMIx answers: a client has its own in its
//     attach info; the agent, asked with RankWildcard about a job of
//     several apps, answers PMIX_ERR_NOT_FOUND (ask with a rank);
//   - local size, pmix.local.size (uint32), and local peers, pmix.lpeers
//     (string: the ranks, ascending, comma-separated): the job's ranks on
//     a node — the asked proc's for a real rank, the agent's (the asking
//     client's) for RankWildcard. A node the job has no proc on has
//     neither (PMIX_ERR_NOT_FOUND);
//   - local rank, pmix.lrank (uint16): the rank's index among the job's
//     ranks on its node, ascending;
//   - node rank, pmix.nrank (uint16): the proc's index among every proc
//     of every job this agent has registered on its node, ordered by
//     nspace, then rank. It counts across jobs, as PRRTE's does; unlike
//     PRRTE's, fixed when a job is mapped, it follows the registrations
//     of this agent: a job registered later whose nspace sorts first on a
//     node moves the node ranks of the procs after it, and an agent that
//     was not given a job does not count it. So that a client never holds
//     a node rank its agent no longer answers, it is not in the attach
//     info: a client asks its agent for it;
//   - hostname, pmix.hname (string): the proc's node in the map; for
//     RankWildcard the agent's node;
//   - pmix.clid (the agent's cluster), pmix.nspace, pmix.rank (Rank);
//   - node list, pmix.nlist (string: the job's nodes, comma-separated,
//     in the order of their first rank), and their number, pmix.num.nodes
//     (uint32);
//   - node id, pmix.nodeid (uint32): the index of the proc's node in the
//     node list (for RankWildcard, the agent's node's);
//   - server URI, pmix.srvr.uri (string): where the agent listens (for
//     RankWildcard and the ranks of its node).
//
// A value the host registered in Job.Info under the same key wins over
// the computed one, except for the identity keys (nspace, rank, cluster,
// hostname): they name where the agent runs the proc, and its events are
// routed by them.
//
// The keys of one process only (pmix.ProcLevel: rank, local rank, node
// rank) exist for a real rank. Every other key answers for RankWildcard
// and for every rank of the job, not only the agent's own clients: the
// hostname of a remote rank is its node, as in PMIx.

// computedKeys are the keys jobView answers, in the order a client's
// attach info lists them.
var computedKeys = []string{
	pmix.KeyJobSize, pmix.KeyUnivSize, pmix.KeyMaxProcs, pmix.KeyJobNumApps, pmix.KeyAppNum, pmix.KeyAppSize,
	pmix.KeyAppLeader, pmix.KeyAppRank, pmix.KeyAppArgv, pmix.KeyLocalSize, pmix.KeyLocalPeers,
	pmix.KeyLocalRank, pmix.KeyNodeRank, pmix.KeyHostname, pmix.KeyClusterID, pmix.KeyNspace, pmix.KeyRank,
	pmix.KeyNodeList, pmix.KeyNumNodes, pmix.KeyNodeID, pmix.KeyServerURI,
}

// appKey reports whether key is about the app a rank runs.
func appKey(key string) bool {
	switch key {
	case pmix.KeyAppNum, pmix.KeyAppSize, pmix.KeyAppLeader, pmix.KeyAppRank, pmix.KeyAppArgv:
		return true
	}
	return false
}

// identityKey reports whether key names the proc itself, which no job
// info of the host overrides.
func identityKey(key string) bool {
	switch key {
	case pmix.KeyNspace, pmix.KeyRank, pmix.KeyClusterID, pmix.KeyHostname:
		return true
	}
	return false
}

// jobView is the job table as the computed info reads it: every job the
// agent has registered, by nspace, and the agent's cluster and node. Its
// methods only read, so they are safe while the agent's lock is held.
type jobView struct {
	cluster string
	node    string
	uri     string // where the agent listens
	jobs    map[string]*job
}

// value returns the value of key for proc (its nspace unqualified) by the
// rules above. found is false when the job map does not answer key for
// proc: a job the agent does not know, a key it does not compute, or a
// key of one process asked with RankWildcard. A computed key without a
// value is found, with PMIX_ERR_NOT_FOUND saying why (a rank not in the
// map, a node without the job's procs).
func (v jobView) value(proc pmix.Proc, key string) (val pmix.Value, found bool, err error) {
	j := v.jobs[proc.Nspace]
	if j == nil || !slices.Contains(computedKeys, key) || (proc.Rank == pmix.RankWildcard && pmix.ProcLevel(key)) {
		return pmix.Value{}, false, nil
	}
	if given, ok := pmix.LookupValue(j.info, key); ok && !identityKey(key) {
		return given, true, nil
	}
	node := v.node
	if proc.Rank != pmix.RankWildcard {
		n, ok := j.procs[proc.Rank]
		if !ok {
			return pmix.Value{}, true, pmix.Errorf(pmix.ErrNotFound, "%s of %v: job %s has no rank %v (%d procs)", pmix.Quote(key), proc, proc.Nspace, proc.Rank, len(j.procs))
		}
		node = n
	}
	if appKey(key) {
		return j.appValue(proc, key)
	}
	switch key {
	case pmix.KeyJobSize, pmix.KeyUnivSize, pmix.KeyMaxProcs:
		return pmix.Uint32(uint32(len(j.procs))), true, nil
	case pmix.KeyJobNumApps:
		return pmix.Uint32(uint32(max(len(j.apps), 1))), true, nil
	case pmix.KeyHostname:
		return pmix.String(node), true, nil
	case pmix.KeyClusterID:
		return pmix.String(v.cluster), true, nil
	case pmix.KeyNspace:
		return pmix.String(j.nspace), true, nil
	case pmix.KeyRank:
		return pmix.RankValue(proc.Rank), true, nil
	case pmix.KeyNodeRank:
		return rank16(key, proc, v.nodeRank(node, proc))
	case pmix.KeyNodeList:
		return pmix.String(strings.Join(j.nodeList(), ",")), true, nil
	case pmix.KeyNumNodes:
		return pmix.Uint32(uint32(len(j.nodeList()))), true, nil
	case pmix.KeyNodeID:
		if i := slices.Index(j.nodeList(), node); i >= 0 {
			return pmix.Uint32(uint32(i)), true, nil
		}
	case pmix.KeyServerURI:
		if node == v.node && v.uri != "" {
			return pmix.String(v.uri), true, nil
		}
		return pmix.Value{}, true, pmix.Errorf(pmix.ErrNotFound, "%s of %v: its agent is not this one", pmix.Quote(key), proc)
	}
	peers := j.ranksOn(node)
	if len(peers) == 0 {
		return pmix.Value{}, true, pmix.Errorf(pmix.ErrNotFound, "%s of %v: job %s has no proc on node %s", pmix.Quote(key), proc, proc.Nspace, pmix.Quote(node))
	}
	switch key {
	case pmix.KeyLocalSize:
		return pmix.Uint32(uint32(len(peers))), true, nil
	case pmix.KeyLocalPeers:
		return pmix.String(j.peersOn(node)), true, nil
	}
	i, _ := slices.BinarySearch(peers, proc.Rank) // pmix.KeyLocalRank
	return rank16(key, proc, i)
}

// appValue answers an app key (appKey) for proc: of the app its rank
// runs; for RankWildcard, of the job's one app.
func (j *job) appValue(proc pmix.Proc, key string) (pmix.Value, bool, error) {
	app, first, size := 0, pmix.Rank(0), len(j.procs)
	switch {
	case proc.Rank != pmix.RankWildcard && len(j.apps) > 0:
		app = j.appOf(proc.Rank)
		first, size = j.appStart[app], j.apps[app].Size
	case proc.Rank == pmix.RankWildcard && len(j.apps) > 1:
		return pmix.Value{}, true, pmix.Errorf(pmix.ErrNotFound, "%s of %v: job %s has %d apps; ask for one of its ranks", pmix.Quote(key), proc, proc.Nspace, len(j.apps))
	case len(j.apps) == 1:
		size = j.apps[0].Size
	}
	switch key {
	case pmix.KeyAppNum:
		return pmix.Uint32(uint32(app)), true, nil
	case pmix.KeyAppSize:
		return pmix.Uint32(uint32(size)), true, nil
	case pmix.KeyAppLeader:
		return pmix.RankValue(first), true, nil
	case pmix.KeyAppRank:
		return pmix.RankValue(proc.Rank - first), true, nil
	}
	if len(j.apps) == 0 || len(j.apps[app].Argv) == 0 { // pmix.KeyAppArgv
		return pmix.Value{}, false, nil
	}
	return pmix.String(strings.Join(j.apps[app].Argv, " ")), true, nil
}

// spans tells, from a job's map, whether it runs on other clusters than
// self (nodes named "cluster:node"): the cluster that names it, its rank
// 0's, and the other clusters, sorted; "" and nil when it does not.
func spans(self cluster.ID, procs map[pmix.Rank]string) (cluster.ID, []cluster.ID) {
	var others []cluster.ID
	for _, n := range procs {
		if id, _, remote := cluster.Split(n); remote && id != self && !slices.Contains(others, id) {
			others = append(others, id)
		}
	}
	if len(others) == 0 {
		return "", nil
	}
	slices.Sort(others)
	home := self
	if id, _, remote := cluster.Split(procs[0]); remote {
		home = id
	}
	return home, others
}

// localNspaceLocked reports whether name is a job of this agent's
// cluster, or of its table, and returns it unqualified: an unqualified
// name, one qualified with this cluster, or with the cluster that names a
// job across clusters ("A:job" of a job this agent hosts ranks of). The
// caller holds a.mu.
func (a *Agent) localNspaceLocked(name string) (string, bool) {
	if ns, ok := a.cfg.Cluster.Local(name); ok {
		return ns, true
	}
	id, ns, _ := cluster.Split(name)
	if j := a.jobs[ns]; j != nil && j.home == id {
		return ns, true
	}
	return "", false
}

// OtherClusters returns the clusters other than the agent's that a job of
// its table runs on (a job across clusters), nil for a job of this
// cluster only: its NAMESPACE events are published on each
// (event.Spans).
func (a *Agent) OtherClusters(nspace string) []cluster.ID {
	a.mu.Lock()
	defer a.mu.Unlock()
	if j := a.jobs[nspace]; j != nil {
		return j.others
	}
	return nil
}

// appOf is the app rank r runs: the last whose first rank is at most r.
func (j *job) appOf(r pmix.Rank) int {
	i, found := slices.BinarySearch(j.appStart, r)
	if !found {
		i--
	}
	return max(i, 0)
}

// appStarts checks j's apps against its procs and returns each app's
// first rank; nil for a job registered without apps.
func appStarts(j Job) ([]pmix.Rank, error) {
	if len(j.Apps) == 0 {
		return nil, nil
	}
	starts := make([]pmix.Rank, len(j.Apps))
	total := 0
	for i, app := range j.Apps {
		if app.Size < 1 {
			return nil, pmix.Errorf(pmix.ErrBadParam, "job %s: app %d has %d procs, want at least 1", j.Nspace, i, app.Size)
		}
		starts[i] = pmix.Rank(total)
		total += app.Size
	}
	if total != len(j.Procs) {
		return nil, pmix.Errorf(pmix.ErrBadParam, "job %s: its apps have %d procs, its map %d", j.Nspace, total, len(j.Procs))
	}
	for r := range j.Procs {
		if int64(r) >= int64(total) {
			return nil, pmix.Errorf(pmix.ErrBadParam, "job %s: rank %v is in none of its apps (ranks 0 to %d)", j.Nspace, r, total-1)
		}
	}
	return starts, nil
}

// rank16 is a local or node rank as PMIx types it.
func rank16(key string, proc pmix.Proc, i int) (pmix.Value, bool, error) {
	if i > math.MaxUint16 {
		return pmix.Value{}, true, pmix.Errorf(pmix.ErrNotFound, "%s of %v: %d does not fit PMIx's uint16", pmix.Quote(key), proc, i)
	}
	return pmix.Uint16(uint16(i)), true, nil
}

// nodeRank is proc's index among the procs of every job on node, ordered
// by nspace, then rank.
func (v jobView) nodeRank(node string, proc pmix.Proc) int {
	n := 0
	for ns, j := range v.jobs {
		if ns < proc.Nspace {
			n += len(j.ranksOn(node))
		}
	}
	i, _ := slices.BinarySearch(v.jobs[proc.Nspace].ranksOn(node), proc.Rank)
	return n + i
}

// attachInfo is what a client gets at attach (its hello reply) beyond
// the identity the agent stamps: the job-level values of its job on the
// agent's node and its own proc-level values but the node rank, computed
// where the host's Job.Info does not give them, then the host's Job.Info. With them the
// client answers a Get of its own job's keys without asking the agent.
func (v jobView) attachInfo(proc pmix.Proc) []pmix.Info {
	j := v.jobs[proc.Nspace]
	if j == nil {
		return nil
	}
	var out []pmix.Info
	for _, k := range computedKeys {
		if _, given := pmix.Lookup(j.info, k); given || identityKey(k) || k == pmix.KeyNodeRank {
			continue
		}
		if val, found, err := v.value(proc, k); found && err == nil {
			out = append(out, pmix.NewInfo(k, val))
		}
	}
	return append(out, j.info...)
}

// nodeRanks is a job's procs on one node.
type nodeRanks struct {
	ranks []pmix.Rank // ascending
	peers string      // ranks as PMIX_LOCAL_PEERS gives them; "" until asked
}

// on returns what is known of the job's procs on node, computing the
// ranks the first time. Every attaching client asks for its node's local
// size, peers and rank: computed at each attach, they made attaching N
// clients of a job on one node cost O(N² log N) (70 % of the agent's CPU
// while 5000 attached).
func (j *job) on(node string) *nodeRanks {
	if nr, ok := j.onNode[node]; ok {
		return nr
	}
	nr := &nodeRanks{}
	for r, n := range j.procs {
		if n == node {
			nr.ranks = append(nr.ranks, r)
		}
	}
	slices.Sort(nr.ranks)
	if j.onNode == nil {
		j.onNode = map[string]*nodeRanks{}
	}
	j.onNode[node] = nr
	return nr
}

// ranksOn returns the job's ranks on node, ascending. The slice is shared:
// it must not be modified.
func (j *job) ranksOn(node string) []pmix.Rank { return j.on(node).ranks }

// nodeList returns the job's nodes in the order of their first rank.
func (j *job) nodeList() []string {
	var nodes []string
	for _, r := range slices.Sorted(func(yield func(pmix.Rank) bool) {
		for r := range j.procs {
			if !yield(r) {
				return
			}
		}
	}) {
		if n := j.procs[r]; !slices.Contains(nodes, n) {
			nodes = append(nodes, n)
		}
	}
	return nodes
}

// peersOn returns the job's ranks on node as PMIX_LOCAL_PEERS lists them:
// decimal, ascending, comma-separated.
func (j *job) peersOn(node string) string {
	nr := j.on(node)
	if nr.peers == "" && len(nr.ranks) > 0 {
		b := make([]byte, 0, len(nr.ranks)*6)
		for i, r := range nr.ranks {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendUint(b, uint64(r), 10)
		}
		nr.peers = string(b)
	}
	return nr.peers
}

// jobViewLocked returns the agent's job table. The caller holds a.mu
// while it reads it.
func (a *Agent) jobViewLocked() jobView {
	return jobView{cluster: string(a.cfg.Cluster), node: a.cfg.Node, uri: a.addr, jobs: a.jobs}
}

// jobValue answers a Get of key for proc from the job map, by the rules
// above: found is false when the map does not answer it, and the Get goes
// on as before (the job info the host registered, committed values).
func (a *Agent) jobValue(proc pmix.Proc, key string) (pmix.Value, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	ns, ok := a.localNspaceLocked(proc.Nspace)
	if !ok {
		return pmix.Value{}, false, nil
	}
	return a.jobViewLocked().value(pmix.Proc{Nspace: ns, Rank: proc.Rank}, key)
}

// getDirectives are the directives a Get of key runs with once the job
// map did not answer it: a PMIx key ("pmix.") is information hosts and
// agents provide, not a value a process commits later, so it is answered
// from what the agent holds, never waited for nor fetched from another
// agent (PMIX_IMMEDIATE): a key no agent computes is PMIX_ERR_NOT_FOUND
// at once, whatever PMIX_TIMEOUT says. OpenPMIx's client likewise asks
// its server for a reserved key it did not find with PMIX_IMMEDIATE.
func getDirectives(key string, info []pmix.Info) []pmix.Info {
	if !pmix.Reserved(key) {
		return info
	}
	// First, so that a PMIX_IMMEDIATE false among info does not undo it.
	return append([]pmix.Info{pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(true))}, info...)
}

// attachInfo is the info of a client attaching (see jobView.attachInfo),
// from the job as registered now, with the node's topology; uid is the
// client process's (SO_PEERCRED; -1 unknown).
func (a *Agent) attachInfo(e *clientEntry, uid int) []pmix.Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	if info := a.jobViewLocked().attachInfo(e.proc); info != nil {
		return a.withTopology(info, uid)
	}
	return a.withTopology(e.job.info, uid)
}

// connectInfo is a job's job-level info as a connect carries it to the
// agents of the other members (collective.Config.JobInfo, RFC0003): the
// host's Job.Info, then the computed values that hold on every node — job
// size, universe size, app number — where the host gave none.
func (a *Agent) connectInfo(nspace string) []pmix.Info {
	a.mu.Lock()
	defer a.mu.Unlock()
	j := a.jobs[nspace]
	if j == nil {
		return nil
	}
	info, v := slices.Clip(j.info), a.jobViewLocked()
	for _, k := range []string{pmix.KeyJobSize, pmix.KeyUnivSize, pmix.KeyJobNumApps, pmix.KeyAppNum} {
		if _, given := pmix.Lookup(j.info, k); given {
			continue
		}
		if val, found, err := v.value(pmix.Proc{Nspace: nspace, Rank: pmix.RankWildcard}, k); found && err == nil {
			info = append(info, pmix.NewInfo(k, val))
		}
	}
	return info
}
