package agent

import (
	"context"
	"maps"
	"slices"
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/proto"
	"github.com/pmixbus/pmixbus/query"
)

// PMIx_Query_info (the query frame): a query.Service answers it, with the
// keys the agent knows registered here — the jobs running in its cluster
// (the launch service's), the size and process table of a job with ranks
// on this node — and the others registered by the capabilities that know
// them through Queries (process sets and groups, spawn support).

// Queries is the agent's query service: a capability answers its own
// keys with Handle (the groups service PMIX_QUERY_NUM_PSETS,
// PMIX_QUERY_PSET_NAMES, PMIX_QUERY_PSET_MEMBERSHIP and the group keys,
// the spawn service PMIX_QUERY_SPAWN_SUPPORT).
func (a *Agent) Queries() *query.Service { return a.queries }

func (a *Agent) newQueries() *query.Service {
	s := query.New()
	s.Handle(pmix.KeyQueryNamespaces, a.queryNamespaces)
	s.Handle(pmix.KeyQueryNamespaceInfo, a.queryNamespaces)
	s.Handle(pmix.KeyJobSize, a.queryJobSize)
	s.Handle(pmix.KeyQueryProcTable, a.queryProcTable)
	s.Handle(pmix.KeyQueryLocalProcTable, a.queryProcTable)
	for _, k := range []string{pmix.KeyQueryNumPsets, pmix.KeyQueryPsetNames, pmix.KeyQueryPsetMembership,
		pmix.KeyQueryNumGroups, pmix.KeyQueryGroupNames, pmix.KeyQueryGroupMembership} {
		s.Handle(k, a.queryPsets)
	}
	s.Handle(pmix.KeyQuerySpawnSupport, a.querySpawnSupport)
	return s
}

// queryNamespaces answers PMIX_QUERY_NAMESPACES (the nspaces of the
// cluster's running jobs and of those registered here, comma-separated)
// and PMIX_QUERY_NAMESPACE_INFO (for each, an info array of its
// PMIX_NSPACE, PMIX_CMD_LINE when launched and PMIX_JOB_SIZE).
func (a *Agent) queryNamespaces(ctx context.Context, _ pmix.Proc, key string, _ []pmix.Info) (pmix.Value, error) {
	type nsInfo struct {
		cmd  string
		size int
	}
	all := map[string]nsInfo{}
	if d := a.launcher.Load(); d != nil {
		recs, err := d.RunningJobs(ctx)
		if err != nil {
			return pmix.Value{}, err
		}
		for _, r := range recs {
			all[r.Nspace] = nsInfo{cmd: r.App, size: r.Size}
		}
	}
	a.mu.Lock()
	for ns, j := range a.jobs {
		in := all[ns]
		in.size = len(j.procs)
		all[ns] = in
	}
	a.mu.Unlock()
	if len(all) == 0 {
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "no job runs in cluster %s", a.cfg.Cluster)
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for ns := range all {
			if !yield(ns) {
				return
			}
		}
	})
	if key == pmix.KeyQueryNamespaces {
		return pmix.String(strings.Join(names, ",")), nil
	}
	out := make([]pmix.Info, 0, len(names))
	for _, ns := range names {
		in := []pmix.Info{pmix.NewInfo(pmix.KeyNspace, pmix.String(ns))}
		if all[ns].cmd != "" {
			in = append(in, pmix.NewInfo(pmix.KeyCmdLine, pmix.String(all[ns].cmd)))
		}
		in = append(in, pmix.NewInfo(pmix.KeyJobSize, pmix.Uint32(uint32(all[ns].size))))
		out = append(out, pmix.NewInfo(pmix.KeyQueryNamespaceInfo, pmix.Infos(in)))
	}
	return pmix.Infos(out), nil
}

// queryJobSize answers PMIX_JOB_SIZE of the job PMIX_NSPACE names (the
// caller's): one with ranks on this node, else one running in the cluster.
func (a *Agent) queryJobSize(ctx context.Context, caller pmix.Proc, _ string, qual []pmix.Info) (pmix.Value, error) {
	ns := query.Nspace(caller, qual)
	a.mu.Lock()
	j, ok := a.jobs[ns]
	n := 0
	if ok {
		n = len(j.procs)
	}
	a.mu.Unlock()
	if ok {
		return pmix.Uint32(uint32(n)), nil
	}
	if d := a.launcher.Load(); d != nil {
		recs, err := d.RunningJobs(ctx)
		if err != nil {
			return pmix.Value{}, err
		}
		for _, r := range recs {
			if r.Nspace == ns {
				return pmix.Uint32(uint32(r.Size)), nil
			}
		}
	}
	return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "no job %s in cluster %s", ns, a.cfg.Cluster)
}

// queryProcTable answers PMIX_QUERY_PROC_TABLE and
// PMIX_QUERY_LOCAL_PROC_TABLE of the job PMIX_NSPACE names (the
// caller's), one with ranks on this node: an info array with one entry
// per rank (of this node only, for the local table), in rank order, each
// an info array of its PMIX_NSPACE, PMIX_RANK, PMIX_HOSTNAME (its node; a
// node of another cluster "cluster:node") and, for the ranks of this node
// the launch service started, PMIX_PROC_PID.
func (a *Agent) queryProcTable(_ context.Context, caller pmix.Proc, key string, qual []pmix.Info) (pmix.Value, error) {
	ns := query.Nspace(caller, qual)
	a.mu.Lock()
	j, ok := a.jobs[ns]
	var procs map[pmix.Rank]string
	if ok {
		procs = j.procs
	}
	a.mu.Unlock()
	if !ok {
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "job %s has no rank on node %s", ns, a.cfg.Node)
	}
	var pids map[pmix.Rank]int
	if d := a.launcher.Load(); d != nil {
		pids = d.LocalPids(ns)
	}
	var out []pmix.Info
	for _, r := range slices.Sorted(func(yield func(pmix.Rank) bool) {
		for r := range procs {
			if !yield(r) {
				return
			}
		}
	}) {
		node := procs[r]
		if key == pmix.KeyQueryLocalProcTable && node != a.cfg.Node {
			continue
		}
		in := []pmix.Info{
			pmix.NewInfo(pmix.KeyNspace, pmix.String(ns)),
			pmix.NewInfo(pmix.KeyRank, pmix.RankValue(r)),
			pmix.NewInfo(pmix.KeyHostname, pmix.String(node)),
		}
		if pid, ok := pids[r]; ok && node == a.cfg.Node {
			in = append(in, pmix.NewInfo(pmix.KeyProcPid, pmix.Int32(int32(pid))))
		}
		out = append(out, pmix.NewInfo(key, pmix.Infos(in)))
	}
	return pmix.Infos(out), nil
}

// query serves a query frame: each entry of its info is a key asked, its
// value the qualifiers (an info array). The reply carries the answers:
// with success when every key was answered, PMIX_QUERY_PARTIAL_SUCCESS
// when some were, PMIX_ERR_NOT_FOUND when none was. On a goroutine of the
// agent's: an answer may ask JetStream.
func (cc *clientConn) query(f *proto.Frame) {
	qs := make([]query.Query, 0, len(f.Info))
	for _, in := range f.Info {
		qual, _ := in.Value.Infos()
		qs = append(qs, query.Query{Keys: []string{in.Key}, Qualifiers: qual})
	}
	caller := cc.entry.proc
	if !cc.a.goFunc(func() {
		answers, err := cc.a.queries.Answer(cc.a.ctx, caller, qs)
		r := &proto.Frame{Type: proto.TypeReply, Seq: f.Seq}
		r.SetErr(err)
		r.Info = answers
		if werr := cc.write(r); werr != nil {
			cc.close(nil)
		}
	}) {
		cc.reply(f, ErrClosed, nil)
	}
}

// The process sets are the PMIx groups constructed (Psets): the pset keys
// and the group keys answer the same sets. None known is
// PMIX_ERR_NOT_FOUND, as before any group exists (OpenPMIx's hello.c
// then prints what it prints under mpirun).
func (a *Agent) queryPsets(_ context.Context, _ pmix.Proc, key string, qualifiers []pmix.Info) (pmix.Value, error) {
	sets := a.Psets()
	if len(sets) == 0 {
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "no process sets")
	}
	switch key {
	case pmix.KeyQueryNumPsets, pmix.KeyQueryNumGroups:
		return pmix.Uint64(uint64(len(sets))), nil
	case pmix.KeyQueryPsetNames, pmix.KeyQueryGroupNames:
		return pmix.String(strings.Join(slices.Sorted(maps.Keys(sets)), ",")), nil
	}
	qual := pmix.KeyPsetName
	if key == pmix.KeyQueryGroupMembership {
		qual = pmix.KeyGroupName
	}
	v, ok := pmix.LookupValue(qualifiers, qual)
	name, isString := v.Str()
	if !ok || !isString {
		return pmix.Value{}, pmix.Errorf(pmix.ErrBadParam, "%s needs the set's name as a %s qualifier", key, qual)
	}
	members, ok := sets[name]
	if !ok {
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotFound, "no process set %s", pmix.Quote(name))
	}
	return pmix.Procs(members), nil
}

// spawnSupport is what PMIX_QUERY_SPAWN_SUPPORT answers: the spawn
// directives the launch service honours (docs/launch.md, Spawn).
var spawnSupport = []string{pmix.KeyHost, pmix.KeyHostfile, pmix.KeyMapBy, pmix.KeyWdir, pmix.KeyNoOver, pmix.KeyTimeout, pmix.KeySpawnCluster}

func (a *Agent) querySpawnSupport(context.Context, pmix.Proc, string, []pmix.Info) (pmix.Value, error) {
	if a.cfg.NoLaunch {
		return pmix.Value{}, pmix.Errorf(pmix.ErrNotSupported, "this agent launches nothing")
	}
	return pmix.String(strings.Join(spawnSupport, ",")), nil
}
