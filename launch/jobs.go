package launch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/iof"
	"github.com/pmixbus/pmixbus/jetstream"
	"github.com/pmixbus/pmixbus/pmix"
	"github.com/pmixbus/pmixbus/subjects"
)

// JobsBucket is the KV bucket, in each cluster's JetStream domain, that
// holds one key per running job launched there: its nspace is taken
// (Create refuses a second launch under the same nspace), and its
// launcher is alive. The launcher refreshes the key; it has a TTL of its
// own, so when the launcher dies the key expires and every agent of the
// job sees the limit marker, waits the job's launcher grace and ends the
// job's processes there, rather than leave orphans. A launcher that ends
// cleanly purges the key, with a marker that expires releasedMarkerTTL
// later: the bucket keeps nothing of finished jobs.
const JobsBucket = "PMIXBUS_JOBS"

// releasedMarkerTTL is how long the purge marker a launcher leaves on
// its job's key as it ends stays in the bucket: long enough for every
// agent's watcher to see it, then nothing of the job is left.
const releasedMarkerTTL = time.Minute

// Defaults of the launcher's key.
const (
	DefaultJobTTL        = 3 * time.Second
	DefaultJobBeat       = time.Second
	DefaultLauncherGrace = 10 * time.Second
)

// JobRecord is the value of a job's key, JSON-encoded.
type JobRecord struct {
	Nspace   string    `json:"nspace"`
	Launcher string    `json:"launcher"`
	Started  time.Time `json:"started"`
	Size     int       `json:"size"`
	Nodes    []string  `json:"nodes,omitempty"`
	App      string    `json:"app,omitempty"`
	// Lost are the nodes the launcher declared lost (unanswering, their
	// liveness keys expired): their ranks count as ended, so an agent
	// that reads its own node here, back from a partition, ends what it
	// still runs of the job rather than let it come back.
	Lost []string `json:"lost,omitempty"`
}

func jobKey(nspace string) string { return subjects.EscapeToken(nspace) }

func jobPutSubject(c cluster.ID, nspace string) string {
	return jetstream.KVPutSubject(c.Domain(), JobsBucket, jobKey(nspace))
}

// openJobs creates with replicas copies (an agent, replicas > 0) or binds
// (a launcher, replicas 0) cluster c's jobs bucket.
func openJobs(ctx context.Context, nc *nats.Conn, c cluster.ID, replicas int) (natsjs.JetStream, natsjs.KeyValue, error) {
	js, err := natsjs.NewWithDomain(nc, c.Domain())
	if err != nil {
		return nil, nil, err
	}
	var kv natsjs.KeyValue
	if replicas > 0 {
		kv, err = js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{
			Bucket:         JobsBucket,
			Description:    "pmixbus jobs running on the cluster and their launchers' liveness (launch)",
			History:        1,
			MaxValueSize:   1 << 20,
			Storage:        natsjs.FileStorage,
			LimitMarkerTTL: time.Minute,
			Replicas:       replicas,
		})
	} else {
		kv, err = js.KeyValue(ctx, JobsBucket)
	}
	if err != nil {
		if errors.Is(err, natsjs.ErrBucketNotFound) {
			return nil, nil, pmix.Errorf(pmix.ErrUnreach, "cluster %s has no agents with a launch service (no %s bucket in domain %s)", c, JobsBucket, c.Domain())
		}
		return nil, nil, pmix.Errorf(pmix.ErrUnreach, "the jobs bucket of cluster %s: %v", c, err)
	}
	return js, kv, nil
}

// claimJob takes nspace on cluster c for the launcher, with a key that
// lives ttl unless refreshed.
//
// Errors: pmix.ErrDuplicateKey (ErrNspaceTaken) when a job of that nspace
// runs there.
func claimJob(ctx context.Context, kv natsjs.KeyValue, rec JobRecord, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, jobKey(rec.Nspace), b, natsjs.KeyTTL(ttl)); err != nil {
		if errors.Is(err, natsjs.ErrKeyExists) {
			return fmt.Errorf("%w: %s", ErrNspaceTaken, rec.Nspace)
		}
		return pmix.Errorf(pmix.ErrUnreach, "claiming nspace %s: %v", rec.Nspace, err)
	}
	return nil
}

// checkKeptOutput refuses an nspace whose earlier run's output the
// cluster's output stream still keeps: the two runs' output would be one
// job's to pmixbus attach.
//
// Errors: ErrNspaceTaken.
func checkKeptOutput(ctx context.Context, js natsjs.JetStream, c cluster.ID, nspace string) error {
	s, err := js.Stream(ctx, iof.StreamName)
	if err != nil {
		return nil // no output stream: no output kept
	}
	info, err := s.Info(ctx, natsjs.WithSubjectFilter(iof.JobFilter(string(c), nspace)))
	if err != nil || len(info.State.Subjects) == 0 {
		return nil
	}
	return fmt.Errorf("%w: cluster %s keeps the output of an earlier run of nspace %s (pmixbus attach %s shows it) until it is older than its agents' --iof-max-age; give another --nspace, or none for a fresh one",
		ErrNspaceTaken, c, pmix.Quote(nspace), cluster.Qualify(c, nspace))
}

// beatJob refreshes the job's key and its TTL.
func beatJob(ctx context.Context, js natsjs.JetStream, c cluster.ID, rec JobRecord, ttl time.Duration) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	_, err = js.PublishMsg(ctx, &nats.Msg{Subject: jobPutSubject(c, rec.Nspace), Data: b}, natsjs.WithMsgTTL(ttl))
	return err
}

// JobNodes returns the nodes of nspace's job running on cluster c, from
// its key in the jobs bucket.
//
// Errors: pmix.ErrNotFound when no job of that nspace runs there;
// pmix.ErrUnreach when the bucket does not answer.
func JobNodes(ctx context.Context, nc *nats.Conn, c cluster.ID, nspace string) ([]string, error) {
	_, kv, err := openJobs(ctx, nc, c, 0)
	if err != nil {
		return nil, err
	}
	e, err := kv.Get(ctx, jobKey(nspace))
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return nil, pmix.Errorf(pmix.ErrNotFound, "no job %s runs on cluster %s", nspace, c)
	}
	if err != nil {
		return nil, pmix.Errorf(pmix.ErrUnreach, "reading job %s of cluster %s: %v", nspace, c, err)
	}
	var rec JobRecord
	if err := decode(e.Value(), &rec); err != nil {
		return nil, err
	}
	return rec.Nodes, nil
}
