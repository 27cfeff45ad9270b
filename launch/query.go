package launch

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
)

// RunningJobs lists the jobs launched in the daemon's cluster that are
// running (the keys of JobsBucket), by nspace, for PMIx_Query_info's
// PMIX_QUERY_NAMESPACES and PMIX_QUERY_NAMESPACE_INFO.
//
// Errors: pmix.ErrUnreach when JetStream does not answer; ctx.Err().
func (d *Daemon) RunningJobs(ctx context.Context) ([]JobRecord, error) {
	_, kv, err := openJobs(ctx, d.cfg.Conn, d.cfg.Cluster, 0)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "listing %s: %v", JobsBucket, err)
	}
	defer func() { _ = keys.Stop() }()
	var out []JobRecord
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			continue // ended meanwhile
		}
		if err != nil {
			return nil, pmix.Errorf(pmix.ErrUnreach, "reading %s: %v", JobsBucket, err)
		}
		var rec JobRecord
		if json.Unmarshal(e.Value(), &rec) == nil && rec.Nspace != "" {
			out = append(out, rec)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b JobRecord) int { return strings.Compare(a.Nspace, b.Nspace) })
	return out, nil
}

// LocalPids maps the ranks of job nspace that run on this node to their
// pids.
func (d *Daemon) LocalPids(nspace string) map[pmix.Rank]int {
	d.mu.Lock()
	defer d.mu.Unlock()
	j, ok := d.jobs[nspace]
	if !ok {
		return nil
	}
	out := make(map[pmix.Rank]int, len(j.procs))
	for r, lp := range j.procs {
		out[r] = lp.p.Pid()
	}
	return out
}
