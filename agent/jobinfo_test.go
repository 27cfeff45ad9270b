package agent

import (
	"errors"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// testJobs is the job table of an agent on n1 of cluster A:
//
//	sim  ranks 0 1 2 on n1, 3 4 on n2, univ size 64 from the host
//	aaa  ranks 0 1 on n2 (sorts before sim: counted first in node ranks)
//	zzz  rank 0 on n1, rank 1 on n2 (sorts after sim), appnum 3 and a
//	     hostname the host tried to give
//	mpm  MPMD: app 0 ranks 0 1, app 1 ranks 2 3 4 ("./b x"), all on n3
func testJobs() jobView {
	mk := func(ns string, info []pmix.Info, nodes ...string) *job {
		j := &job{nspace: ns, info: info, procs: map[pmix.Rank]string{}}
		for r, n := range nodes {
			j.procs[pmix.Rank(r)] = n
		}
		return j
	}
	return jobView{cluster: "A", node: "n1", uri: "unix:/run/a.sock", jobs: map[string]*job{
		"sim": mk("sim", []pmix.Info{pmix.NewInfo(pmix.KeyUnivSize, pmix.Uint32(64))}, "n1", "n1", "n1", "n2", "n2"),
		"aaa": mk("aaa", nil, "n2", "n2"),
		"zzz": mk("zzz", []pmix.Info{
			pmix.NewInfo(pmix.KeyAppNum, pmix.Uint32(3)),
			pmix.NewInfo(pmix.KeyHostname, pmix.String("elsewhere")),
		}, "n1", "n2"),
		"mpm": mpmdJob(),
	}}
}

func mpmdJob() *job {
	j := Job{Nspace: "mpm", Procs: map[pmix.Rank]string{0: "n3", 1: "n3", 2: "n3", 3: "n3", 4: "n3"},
		Apps: []App{{Size: 2, Argv: []string{"./a"}}, {Size: 3, Argv: []string{"./b", "x"}}}}
	starts, err := appStarts(j)
	if err != nil {
		panic(err)
	}
	return &job{nspace: j.Nspace, procs: j.Procs, apps: j.Apps, appStart: starts}
}

// TestAppStarts: apps whose sizes do not add up to the job's map are
// refused.
func TestAppStarts(t *testing.T) {
	procs := map[pmix.Rank]string{0: "n", 1: "n", 2: "n"}
	for name, apps := range map[string][]App{
		"too few":   {{Size: 1}, {Size: 1}},
		"too many":  {{Size: 2}, {Size: 2}},
		"empty app": {{Size: 3}, {Size: 0}},
	} {
		if _, err := appStarts(Job{Nspace: "j", Procs: procs, Apps: apps}); !errors.Is(err, pmix.ErrBadParam) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := appStarts(Job{Nspace: "j", Procs: map[pmix.Rank]string{0: "n", 5: "n"}, Apps: []App{{Size: 2}}}); !errors.Is(err, pmix.ErrBadParam) {
		t.Errorf("a rank beyond the apps: %v", err)
	}
	if s, err := appStarts(Job{Nspace: "j", Procs: procs, Apps: []App{{Size: 1}, {Size: 2}}}); err != nil || len(s) != 2 || s[1] != 1 {
		t.Errorf("starts %v, %v", s, err)
	}
}

func TestJobViewValue(t *testing.T) {
	v := testJobs()
	wild := pmix.RankWildcard
	for _, tc := range []struct {
		ns   string
		rank pmix.Rank
		key  string
		want pmix.Value // the zero Value: not found by the map (the Get goes on)
		err  bool       // found, PMIX_ERR_NOT_FOUND
	}{
		{"sim", wild, pmix.KeyJobSize, pmix.Uint32(5), false},
		{"sim", 4, pmix.KeyJobSize, pmix.Uint32(5), false},
		{"sim", wild, pmix.KeyUnivSize, pmix.Uint32(64), false}, // the host's
		{"aaa", wild, pmix.KeyUnivSize, pmix.Uint32(2), false},
		{"sim", wild, pmix.KeyMaxProcs, pmix.Uint32(5), false}, // the job size, as Open MPI 4.1 requires it
		{"aaa", 1, pmix.KeyMaxProcs, pmix.Uint32(2), false},
		{"sim", 1, pmix.KeyAppNum, pmix.Uint32(0), false},
		{"zzz", wild, pmix.KeyAppNum, pmix.Uint32(3), false},
		{"sim", wild, pmix.KeyLocalSize, pmix.Uint32(3), false}, // on n1, the agent's node
		{"sim", wild, pmix.KeyLocalPeers, pmix.String("0,1,2"), false},
		{"sim", 3, pmix.KeyLocalSize, pmix.Uint32(2), false}, // rank 3's node, n2
		{"sim", 4, pmix.KeyLocalPeers, pmix.String("3,4"), false},
		{"aaa", wild, pmix.KeyLocalSize, pmix.Value{}, true}, // none on n1
		{"aaa", wild, pmix.KeyLocalPeers, pmix.Value{}, true},
		{"sim", 0, pmix.KeyLocalRank, pmix.Uint16(0), false},
		{"sim", 2, pmix.KeyLocalRank, pmix.Uint16(2), false},
		{"sim", 4, pmix.KeyLocalRank, pmix.Uint16(1), false},
		{"sim", wild, pmix.KeyLocalRank, pmix.Value{}, false}, // one process's
		// n1: sim.0 sim.1 sim.2 zzz.0; n2: aaa.0 aaa.1 sim.3 sim.4 zzz.1
		{"sim", 0, pmix.KeyNodeRank, pmix.Uint16(0), false},
		{"zzz", 0, pmix.KeyNodeRank, pmix.Uint16(3), false},
		{"aaa", 1, pmix.KeyNodeRank, pmix.Uint16(1), false},
		{"sim", 3, pmix.KeyNodeRank, pmix.Uint16(2), false},
		{"zzz", 1, pmix.KeyNodeRank, pmix.Uint16(4), false},
		{"sim", 3, pmix.KeyHostname, pmix.String("n2"), false}, // a remote rank: its node
		{"sim", wild, pmix.KeyHostname, pmix.String("n1"), false},
		{"zzz", 1, pmix.KeyHostname, pmix.String("n2"), false}, // identity: not the host's
		{"sim", 2, pmix.KeyRank, pmix.RankValue(2), false},
		{"sim", wild, pmix.KeyRank, pmix.Value{}, false},
		{"sim", 2, pmix.KeyNspace, pmix.String("sim"), false},
		{"sim", wild, pmix.KeyClusterID, pmix.String("A"), false},
		{"sim", wild, pmix.KeyNodeList, pmix.String("n1,n2"), false},
		{"aaa", 0, pmix.KeyNodeList, pmix.String("n2"), false},
		{"sim", 1, pmix.KeyNumNodes, pmix.Uint32(2), false},
		{"sim", 4, pmix.KeyNodeID, pmix.Uint32(1), false},
		{"sim", wild, pmix.KeyNodeID, pmix.Uint32(0), false}, // the agent's node, n1
		{"aaa", wild, pmix.KeyNodeID, pmix.Value{}, true},    // none on n1
		{"sim", wild, pmix.KeyServerURI, pmix.String("unix:/run/a.sock"), false},
		{"sim", 3, pmix.KeyServerURI, pmix.Value{}, true}, // another agent's rank
		{"sim", 9, pmix.KeyJobSize, pmix.Value{}, true},   // no such rank
		{"sim", 9, pmix.KeyHostname, pmix.Value{}, true},
		{"sim", 1, "user.key", pmix.Value{}, false},
		{"sim", wild, "pmix.no.such", pmix.Value{}, false},
		{"nojob", wild, pmix.KeyJobSize, pmix.Value{}, false},
		// one app
		{"sim", 3, pmix.KeyAppSize, pmix.Uint32(5), false},
		{"sim", wild, pmix.KeyAppLeader, pmix.RankValue(0), false},
		{"sim", 3, pmix.KeyAppRank, pmix.RankValue(3), false},
		{"sim", wild, pmix.KeyJobNumApps, pmix.Uint32(1), false},
		{"sim", 3, pmix.KeyAppArgv, pmix.Value{}, false}, // the host gave none
		// MPMD
		{"mpm", wild, pmix.KeyJobSize, pmix.Uint32(5), false},
		{"mpm", wild, pmix.KeyJobNumApps, pmix.Uint32(2), false},
		{"mpm", 1, pmix.KeyAppNum, pmix.Uint32(0), false},
		{"mpm", 2, pmix.KeyAppNum, pmix.Uint32(1), false},
		{"mpm", 1, pmix.KeyAppSize, pmix.Uint32(2), false},
		{"mpm", 4, pmix.KeyAppSize, pmix.Uint32(3), false},
		{"mpm", 1, pmix.KeyAppLeader, pmix.RankValue(0), false},
		{"mpm", 3, pmix.KeyAppLeader, pmix.RankValue(2), false},
		{"mpm", 4, pmix.KeyAppRank, pmix.RankValue(2), false},
		{"mpm", 2, pmix.KeyAppArgv, pmix.String("./b x"), false},
		{"mpm", wild, pmix.KeyAppNum, pmix.Value{}, true}, // which app? the client answers its own
		{"mpm", wild, pmix.KeyAppSize, pmix.Value{}, true},
		{"mpm", wild, pmix.KeyAppRank, pmix.Value{}, false}, // one process's
	} {
		proc := pmix.Proc{Nspace: tc.ns, Rank: tc.rank}
		got, found, err := v.value(proc, tc.key)
		switch {
		case tc.err:
			if !found || !errors.Is(err, pmix.ErrNotFound) {
				t.Errorf("%v %s: %v, found %v, %v; want PMIX_ERR_NOT_FOUND", proc, tc.key, got, found, err)
			}
		case tc.want.IsUndef():
			if found {
				t.Errorf("%v %s: %v, %v; want it left to the rest of Get", proc, tc.key, got, err)
			}
		case !found || err != nil || !got.Equal(tc.want) || got.Type() != tc.want.Type():
			t.Errorf("%v %s: %v (%v), found %v, %v; want %v (%v)", proc, tc.key, got, got.Type(), found, err, tc.want, tc.want.Type())
		}
	}
}

// TestJobViewAttachInfo: a client's attach info holds its job's values on
// its node and its own, the host's where it gave them, each key once.
func TestJobViewAttachInfo(t *testing.T) {
	v := testJobs()
	info := v.attachInfo(pmix.Proc{Nspace: "sim", Rank: 1})
	seen := map[string]bool{}
	for _, in := range info {
		if seen[in.Key] {
			t.Errorf("%s twice in %s", in.Key, pmix.FormatInfos(info))
		}
		seen[in.Key] = true
	}
	for key, want := range map[string]pmix.Value{
		pmix.KeyJobSize:    pmix.Uint32(5),
		pmix.KeyUnivSize:   pmix.Uint32(64),
		pmix.KeyAppNum:     pmix.Uint32(0),
		pmix.KeyLocalSize:  pmix.Uint32(3),
		pmix.KeyLocalPeers: pmix.String("0,1,2"),
		pmix.KeyLocalRank:  pmix.Uint16(1),
	} {
		if got, ok := pmix.LookupValue(info, key); !ok || !got.Equal(want) {
			t.Errorf("%s: %v, %v; want %v", key, got, ok, want)
		}
	}
	for _, key := range []string{pmix.KeyHostname, pmix.KeyRank, pmix.KeyNspace, pmix.KeyClusterID, pmix.KeyNodeRank} {
		if _, ok := pmix.LookupValue(info, key); ok {
			t.Errorf("%s in the attach info: the agent stamps the identity, and a node rank may move", key)
		}
	}
	if v.attachInfo(pmix.Proc{Nspace: "nojob", Rank: 0}) != nil {
		t.Error("attach info of a job not registered")
	}
}

// TestGetDirectives: a PMIx key is read with PMIX_IMMEDIATE, whatever the
// caller said; an application's key as the caller said.
func TestGetDirectives(t *testing.T) {
	wait := pmix.NewInfo(pmix.KeyTimeout, pmix.Int32(20))
	notNow := pmix.NewInfo(pmix.KeyImmediate, pmix.Bool(false))
	for _, tc := range []struct {
		key       string
		info      []pmix.Info
		immediate bool
	}{
		{"pmix.no.such", nil, true},
		{"pmix.no.such", []pmix.Info{wait, notNow}, true},
		{"user.key", []pmix.Info{wait}, false},
		{"user.key", []pmix.Info{notNow}, false},
		{"pmixbus.coll.id", nil, false}, // not "pmix."
	} {
		if got := pmix.Flag(getDirectives(tc.key, tc.info), pmix.KeyImmediate); got != tc.immediate {
			t.Errorf("%s with %s: PMIX_IMMEDIATE %v, want %v", tc.key, pmix.FormatInfos(tc.info), got, tc.immediate)
		}
	}
}
