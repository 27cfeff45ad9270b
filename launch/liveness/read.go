package liveness

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/security"
)

// DiscoverySubject is where a tool asks which clusters are reachable:
// every agent subscribes in a queue group named after its cluster, so one
// agent of each cluster answers, with a ClusterInfo.
const DiscoverySubject = security.DiscoverySubject

// ClusterInfo is an agent's answer on DiscoverySubject.
type ClusterInfo struct {
	Cluster cluster.ID `json:"cluster"`
	Domain  string     `json:"domain"`
	// Node is the agent that answered.
	Node string `json:"node"`
}

func (s *Service) answerDiscovery(m *nats.Msg) {
	b, _ := json.Marshal(ClusterInfo{Cluster: s.cfg.Cluster, Domain: s.cfg.Cluster.Domain(), Node: s.cfg.Node})
	_ = m.Respond(b)
}

// Clusters asks every reachable cluster's agents on DiscoverySubject and
// returns the clusters that answered within wait (sooner when no answer
// came for a fifth of it after the last one), sorted.
//
// Errors: ErrUnreachable when the request could not be sent; ctx.Err().
func Clusters(ctx context.Context, nc *nats.Conn, wait time.Duration) ([]ClusterInfo, error) {
	inbox := nc.NewRespInbox()
	ch := make(chan *nats.Msg, 64)
	sub, err := nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUnreachable, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := nc.PublishRequest(DiscoverySubject, inbox, nil); err != nil {
		return nil, fmt.Errorf("%w: asking for the clusters: %w", ErrUnreachable, err)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	quiet := time.NewTimer(wait)
	defer quiet.Stop()
	seen := map[cluster.ID]ClusterInfo{}
	for {
		select {
		case m := <-ch:
			var ci ClusterInfo
			if json.Unmarshal(m.Data, &ci) != nil || ci.Cluster.Validate() != nil {
				continue
			}
			if _, dup := seen[ci.Cluster]; !dup {
				seen[ci.Cluster] = ci
			}
			quiet.Reset(wait / 5)
			continue
		case <-quiet.C:
		case <-deadline.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		break
	}
	out := make([]ClusterInfo, 0, len(seen))
	for _, ci := range seen {
		out = append(out, ci)
	}
	slices.SortFunc(out, func(a, b ClusterInfo) int { return cmp.Compare(a.Cluster, b.Cluster) })
	return out, nil
}

// ReadAgents reads cluster id's bucket through nc (a connection to any
// server linked to the cluster's domain): every node whose key is up,
// expired and not yet forgotten (Down, for the bucket's marker TTL), or
// deleted by a clean stop (Stopped), sorted by node.
//
// Errors: ErrNoBucket when the cluster's domain has no agents bucket;
// ErrUnreachable when its JetStream does not answer; ctx.Err().
func ReadAgents(ctx context.Context, nc *nats.Conn, id cluster.ID) ([]Entry, error) {
	js, err := jsFor(nc, id)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, Bucket)
	if errors.Is(err, natsjs.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: cluster %s", ErrNoBucket, id)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s in domain %s: %w", ErrUnreachable, Bucket, id.Domain(), err)
	}
	// The keys there are now: a watch's "initial values done" can come
	// before a key that was rewritten while the watch started, which then
	// arrives as an update (agents rewrite theirs every interval).
	keys, err := streamKeys(ctx, js)
	if err != nil {
		return nil, fmt.Errorf("%w: %s in domain %s: %w", ErrUnreachable, Bucket, id.Domain(), err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s in domain %s: %w", ErrUnreachable, Bucket, id.Domain(), err)
	}
	defer func() { _ = w.Stop() }()
	got := map[string]Entry{}
	var late <-chan time.Time // after the initial values, the wait for keys rewritten meanwhile
	for late == nil || len(keys) > 0 {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return nil, fmt.Errorf("%w: reading %s in domain %s: the watch ended", ErrUnreachable, Bucket, id.Domain())
			}
			if e == nil {
				late = time.After(lateKeysWait)
				continue
			}
			delete(keys, e.Key())
			en := Entry{Cluster: id, Node: nodeOf(e.Key()), Revision: e.Revision(), At: e.Created()}
			switch e.Operation() {
			case natsjs.KeyValuePut:
				en.State = Up
				en.Record, _ = parseRecord(e.Value())
			case natsjs.KeyValuePurge:
				en.State = Down
			default:
				en.State = Stopped
			}
			got[e.Key()] = en
		case <-late:
			keys = nil // gone meanwhile (a marker that expired)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	out := make([]Entry, 0, len(got))
	for _, en := range got {
		out = append(out, en)
	}
	slices.SortFunc(out, func(a, b Entry) int { return cmp.Compare(a.Node, b.Node) })
	return out, nil
}

// lateKeysWait bounds the wait for keys that were rewritten while a read
// started: longer than any agent's refresh interval.
const lateKeysWait = 2 * time.Second

// streamKeys returns the keys the bucket holds a message for.
func streamKeys(ctx context.Context, js natsjs.JetStream) (map[string]bool, error) {
	st, err := js.Stream(ctx, "KV_"+Bucket)
	if err != nil {
		return nil, err
	}
	prefix := "$KV." + Bucket + "."
	info, err := st.Info(ctx, natsjs.WithSubjectFilter(prefix+">"))
	if err != nil {
		return nil, err
	}
	keys := make(map[string]bool, len(info.State.Subjects))
	for subj := range info.State.Subjects {
		keys[strings.TrimPrefix(subj, prefix)] = true
	}
	return keys, nil
}
