package liveness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// Bucket is the KV bucket of a cluster's agents, in the cluster's own
// JetStream domain; each agent's key is its node (subjects.EscapeToken).
const Bucket = "PMIXBUS_AGENTS"

// maxValueSize bounds a key's value: a node hosting tens of thousands of
// ranks still fits.
const maxValueSize = 1 << 20

// Record is the value of an agent's key, JSON-encoded.
type Record struct {
	Cluster cluster.ID `json:"cluster"`
	Node    string     `json:"node"`
	// Instance is unique per agent run: it tells a restarted agent, or a
	// second agent claiming the node, from the one that wrote the key.
	Instance string `json:"instance"`
	Slots    int    `json:"slots"`
	// Used is the slots in use: the ranks the node's jobs place on it.
	Used    int       `json:"used"`
	Version string    `json:"version"`
	Listen  string    `json:"listen,omitempty"`
	Started time.Time `json:"started"`
	// IntervalMS and TTLMS are the agent's refresh interval and key TTL.
	IntervalMS int64 `json:"interval_ms"`
	TTLMS      int64 `json:"ttl_ms"`
	// Jobs are the jobs whose job maps place ranks on the node.
	Jobs []HostedJob `json:"jobs,omitempty"`
}

// HostedJob is a job with ranks on a node, and those ranks.
type HostedJob struct {
	Nspace  string      `json:"nspace"`
	Session string      `json:"session,omitempty"`
	Ranks   []pmix.Rank `json:"ranks"`
}

// Procs returns the job's procs on the node.
func (j HostedJob) Procs() []pmix.Proc {
	out := make([]pmix.Proc, len(j.Ranks))
	for i, r := range j.Ranks {
		out[i] = pmix.Proc{Nspace: j.Nspace, Rank: r}
	}
	return out
}

// TTL is the key's TTL the record announces.
func (r *Record) TTL() time.Duration { return time.Duration(r.TTLMS) * time.Millisecond }

// Interval is the refresh interval the record announces.
func (r *Record) Interval() time.Duration { return time.Duration(r.IntervalMS) * time.Millisecond }

func (r *Record) marshal() ([]byte, error) { return json.Marshal(r) }

// parseRecord decodes a key's value. The bucket is writable by every agent
// of the cluster, so the value is checked, not trusted.
func parseRecord(b []byte) (*Record, error) {
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "agent record: %v", err)
	}
	if r.Node == "" {
		return nil, pmix.Errorf(pmix.ErrUnpackFailure, "agent record: no node")
	}
	for _, j := range r.Jobs {
		if j.Nspace == "" || len(j.Nspace) > pmix.MaxNspaceLen {
			return nil, pmix.Errorf(pmix.ErrUnpackFailure, "agent record of %s: job nspace of %d bytes", pmix.Quote(r.Node), len(j.Nspace))
		}
		for _, rk := range j.Ranks {
			if !rk.Valid() {
				return nil, pmix.Errorf(pmix.ErrUnpackFailure, "agent record of %s: job %s: invalid rank %v", pmix.Quote(r.Node), pmix.Quote(j.Nspace), rk)
			}
		}
	}
	return &r, nil
}

// key is a node's key in the bucket.
func key(node string) string { return subjects.EscapeToken(node) }

// bucketConfig is the bucket as an agent creates it: one value per key,
// per-key TTLs with limit markers, so that a watcher sees a key expire.
func bucketConfig(c Config) natsjs.KeyValueConfig {
	return natsjs.KeyValueConfig{
		Bucket:         Bucket,
		Description:    "pmixbus agents of the cluster and their liveness (launch/liveness)",
		History:        1,
		MaxValueSize:   maxValueSize,
		Storage:        natsjs.FileStorage,
		Replicas:       max(c.Replicas, 1),
		LimitMarkerTTL: c.MarkerTTL,
	}
}

// jsFor returns a JetStream context on the cluster's domain.
func jsFor(nc *nats.Conn, id cluster.ID) (natsjs.JetStream, error) {
	js, err := natsjs.NewWithDomain(nc, id.Domain())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return js, nil
}

// putSubject is where a value with a TTL of its own is published: the
// bucket's subject through the domain's API prefix, as nats.go's KV does
// for a bucket of another domain.
func putSubject(id cluster.ID, k string) string {
	return jetstream.KVPutSubject(id.Domain(), Bucket, k)
}

// openBucket creates the bucket, or updates it to c's settings.
func openBucket(ctx context.Context, js natsjs.JetStream, c Config) (natsjs.KeyValue, error) {
	kv, err := js.CreateOrUpdateKeyValue(ctx, bucketConfig(c))
	if err != nil {
		return nil, fmt.Errorf("%w: %s in domain %s: %w", ErrUnreachable, Bucket, c.Cluster.Domain(), err)
	}
	return kv, nil
}
