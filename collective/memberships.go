package collective

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"sync"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/pmix"
)

// DefaultGroupsBucket is the KV bucket, in each cluster's JetStream
// domain, that holds the memberships of the groups with members in that
// cluster (docs/subjects.md).
const DefaultGroupsBucket = "PMIXBUS_GROUPS"

// Membership is a connect's group as it is stored: what an agent that
// restarts must know again.
type Membership struct {
	Members []pmix.Proc // qualified, in new rank order
	Flags   Flags
	Gone    []pmix.Proc // members that terminated without disconnecting
}

// Memberships keeps the groups of a cluster where agents that restart
// find them again. In each cluster one agent writes a group: the one
// hosting its first member there. NATSMemberships keeps them in
// JetStream KV; MemMemberships in memory (tests, and agents without
// JetStream).
type Memberships interface {
	// Put stores a group's membership under its new nspace (qualified).
	Put(ctx context.Context, nspace string, m Membership) error
	// Delete forgets a group; deleting one not stored is no error.
	Delete(ctx context.Context, nspace string) error
	// All returns every group stored, by new nspace.
	All(ctx context.Context) (map[string]Membership, error)
}

// MemMemberships keeps memberships in memory. Safe for concurrent use.
type MemMemberships struct {
	mu sync.Mutex
	m  map[string]Membership
}

// NewMemMemberships returns an empty store.
func NewMemMemberships() *MemMemberships { return &MemMemberships{m: map[string]Membership{}} }

// Put implements Memberships.
func (s *MemMemberships) Put(_ context.Context, nspace string, m Membership) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[nspace] = m
	return nil
}

// Delete implements Memberships.
func (s *MemMemberships) Delete(_ context.Context, nspace string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, nspace)
	return nil
}

// All implements Memberships.
func (s *MemMemberships) All(context.Context) (map[string]Membership, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.m), nil
}

// NATSMemberships keeps memberships in a KV bucket of a JetStream domain,
// created on first use. Keys are the new nspaces, base64url-encoded;
// values [members: [Proc], flags: uint, gone: [Proc]] in msgpack. Safe for
// concurrent use.
type NATSMemberships struct {
	nc       *nats.Conn
	domain   string
	bucket   string
	replicas int

	mu sync.Mutex
	kv natsjs.KeyValue

	// ctxMu guards the block of context ids this agent took (pgroup.go).
	ctxMu           sync.Mutex
	ctxNext, ctxEnd uint64
}

// NewNATSMemberships returns a store in bucket of domain (the cluster's),
// with replicas (0 means 1) when it creates the bucket. It does no I/O.
func NewNATSMemberships(nc *nats.Conn, domain, bucket string, replicas int) *NATSMemberships {
	return &NATSMemberships{nc: nc, domain: domain, bucket: bucket, replicas: max(replicas, 1)}
}

func (s *NATSMemberships) open(ctx context.Context) (natsjs.KeyValue, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.kv != nil {
		return s.kv, nil
	}
	js, err := natsjs.NewWithDomain(s.nc, s.domain)
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{
		Bucket: s.bucket, Replicas: s.replicas, Description: "pmixbus: memberships of connected groups (collective)",
	})
	if err != nil {
		return nil, fmt.Errorf("opening the %s bucket in domain %s: %w", s.bucket, s.domain, err)
	}
	s.kv = kv
	return kv, nil
}

func groupKey(nspace string) string { return base64.RawURLEncoding.EncodeToString([]byte(nspace)) }

// Put implements Memberships.
func (s *NATSMemberships) Put(ctx context.Context, nspace string, m Membership) error {
	kv, err := s.open(ctx)
	if err != nil {
		return err
	}
	w := newEnc()
	w.arr(3)
	w.procs(m.Members)
	w.uint(uint64(m.Flags))
	w.procs(m.Gone)
	b, err := w.bytes()
	if err != nil {
		return err
	}
	_, err = kv.Put(ctx, groupKey(nspace), b)
	return err
}

// Delete implements Memberships.
func (s *NATSMemberships) Delete(ctx context.Context, nspace string) error {
	kv, err := s.open(ctx)
	if err != nil {
		return err
	}
	if err := kv.Delete(ctx, groupKey(nspace)); err != nil && !errors.Is(err, natsjs.ErrKeyNotFound) {
		return err
	}
	return nil
}

// All implements Memberships.
func (s *NATSMemberships) All(ctx context.Context) (map[string]Membership, error) {
	kv, err := s.open(ctx)
	if err != nil {
		return nil, err
	}
	keys, err := kv.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]Membership{}
	for k := range keys.Keys() {
		e, err := kv.Get(ctx, k)
		if errors.Is(err, natsjs.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		ns, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil {
			continue // not ours
		}
		var m Membership
		derr := decode(e.Value(), "membership", func(d *dec) {
			d.arr(3, "membership")
			m.Members = d.procs("members")
			m.Flags = Flags(d.uint(255, "flags"))
			m.Gone = d.procs("gone")
		})
		if derr != nil {
			return nil, derr
		}
		out[string(ns)] = m
	}
	return out, nil
}
