package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"

	"github.com/pmixbus/pmixbus/cluster"
)

// KV is a key-value bucket as pmixbus uses it: atomic create, a read of many
// keys in one round trip, a delete conditional on the revision read, and
// watches. NATSKV keeps it in a JetStream domain; MemKV in memory, for
// tests of the logic above it.
//
// Keys use the alphabet of JetStream KV keys: letters, digits, '-', '_',
// '=', '/', and '.' between non-empty tokens. Escape arbitrary names with
// subjects.EscapeToken first.
type KV interface {
	// Create stores value under key if the key is absent or deleted, and
	// returns the new revision. It is atomic: of concurrent creators of one
	// key, exactly one succeeds.
	//
	// Errors: ErrKeyExists; ErrInvalidKey; ErrUnreachable.
	Create(ctx context.Context, key string, value []byte) (revision uint64, err error)

	// GetMany returns the current entry of each key that exists, keyed by
	// key; absent and deleted keys are left out. It costs one round trip
	// whatever the number of keys.
	//
	// Errors: ErrInvalidKey; ErrUnreachable.
	GetMany(ctx context.Context, keys []string) (map[string]KVEntry, error)

	// Delete deletes key if its current revision is revision.
	//
	// Errors: ErrRevisionMismatch when the key is at another revision or
	// already deleted; ErrInvalidKey; ErrUnreachable.
	Delete(ctx context.Context, key string, revision uint64) error

	// Follow reports every change stored in the bucket from now on to
	// report, one call at a time and in the order stored: KVCurrent once
	// the follow is in place (anything stored after it is reported), then
	// KVPut and KVDeleted (deletions, purges, expiries) for every key, and
	// a last KVLapsed if the follow breaks. It reports deletions and says
	// when it stops being complete, so that a cache of keys read after
	// KVCurrent can be kept from it. Reports run on a
	// goroutine of the follow: do not block in them.
	//
	// Errors: ErrUnreachable; ErrKVClosed.
	Follow(ctx context.Context, report func(KVChange)) (KVFollow, error)

	// Name identifies the bucket in messages: "bucket@domain".
	Name() string
}

// KVEntry is one stored value.
type KVEntry struct {
	Key      string
	Value    []byte
	Revision uint64
}

// KVConfig configures a NATSKV.
type KVConfig struct {
	// Conn is the NATS connection, owned by the caller. Required.
	Conn *nats.Conn
	// Domain is the JetStream domain holding the bucket. Required.
	Domain string
	// Bucket is the bucket name: letters, digits, '-' and '_'. Required.
	Bucket string
	// Description is stored with the bucket when this handle creates it.
	Description string
	// Replicas of the bucket when this handle creates it: 1 (the default)
	// to 5, at most the number of servers in the domain.
	Replicas int
	// Storage of the bucket when this handle creates it; the default is
	// file storage.
	Storage natsjs.StorageType
	// Timeout bounds each operation whose context has no deadline. Zero
	// means DefaultKVTimeout.
	Timeout time.Duration
	// FollowHeartbeat is how often an idle follow (Follow) hears from the
	// server; one that hears nothing for twice as long lapses. Zero means
	// DefaultFollowHeartbeat; at least 500 ms.
	FollowHeartbeat time.Duration
}

// DefaultKVTimeout bounds an operation whose context has no deadline.
const DefaultKVTimeout = 5 * time.Second

// Validate reports every problem with c at once, in an error wrapping
// ErrInvalidKVConfig.
func (c KVConfig) Validate() error {
	var errs []error
	if c.Conn == nil {
		errs = append(errs, errors.New("conn: nil"))
	}
	if err := cluster.ID(c.Domain).Validate(); err != nil {
		errs = append(errs, fmt.Errorf("domain: %w", err))
	}
	if !bucketValid(c.Bucket) {
		errs = append(errs, fmt.Errorf("bucket %q: want 1 or more letters, digits, '-' and '_'", c.Bucket))
	}
	if c.Replicas < 0 || c.Replicas > 5 {
		errs = append(errs, fmt.Errorf("replicas %d: want 1 to 5 (0 means 1)", c.Replicas))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("timeout %v: negative", c.Timeout))
	}
	if c.FollowHeartbeat != 0 && (c.FollowHeartbeat < 500*time.Millisecond || c.FollowHeartbeat > 30*time.Second) {
		errs = append(errs, fmt.Errorf("follow heartbeat %v: want 500ms to 30s (0: the default)", c.FollowHeartbeat))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidKVConfig, errors.Join(errs...))
	}
	return nil
}

// NATSKV is a KV bucket in a JetStream domain, reached through any server
// of any cluster linked to that domain. It provisions the bucket on first
// use — creating it if missing, with the configured replicas and storage —
// and retries provisioning on the next operation after a failure, so a
// handle made while the domain is unreachable starts working when it comes
// back. Safe for concurrent use.
type NATSKV struct {
	cfg    KVConfig
	js     natsjs.JetStream
	getter *multiGetter

	mu     sync.Mutex // serializes provisioning
	kv     natsjs.KeyValue
	closed bool

	fmu        sync.Mutex
	fclosed    bool
	follows    map[*follower]struct{} // running follows, lapsed on a disconnection
	status     chan nats.Status       // the connection's status, while follows were made
	statusDone chan struct{}          // closed when watchStatus returns
}

// NewKV returns a handle on the bucket cfg names. It does no I/O: the
// bucket is provisioned by the first operation.
//
// Errors: an error wrapping ErrInvalidKVConfig.
func NewKV(cfg KVConfig) (*NATSKV, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultKVTimeout
	}
	if cfg.Replicas == 0 {
		cfg.Replicas = 1
	}
	if cfg.FollowHeartbeat == 0 {
		cfg.FollowHeartbeat = DefaultFollowHeartbeat
	}
	js, err := natsjs.NewWithDomain(cfg.Conn, cfg.Domain)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidKVConfig, err)
	}
	return &NATSKV{
		cfg:    cfg,
		js:     js,
		getter: newMultiGetter(cfg.Conn, fmt.Sprintf("$JS.%s.API.DIRECT.GET.KV_%s", cfg.Domain, cfg.Bucket), kvSubjectPrefix(cfg.Bucket)),
	}, nil
}

// Name returns "bucket@domain".
func (k *NATSKV) Name() string { return k.cfg.Bucket + "@" + k.cfg.Domain }

// Domain returns the bucket's JetStream domain.
func (k *NATSKV) Domain() string { return k.cfg.Domain }

// Bucket returns the bucket's name.
func (k *NATSKV) Bucket() string { return k.cfg.Bucket }

// Close releases the handle's subscription. Operations after Close return
// ErrKVClosed; watches already running keep running until stopped; follows
// lapse. Safe to call twice.
func (k *NATSKV) Close() error {
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.closeFollows()
	return k.getter.close()
}

// Provision creates the bucket if it does not exist, or opens it; the other
// methods call it. It is exported so that an agent can provision eagerly.
//
// Errors: ErrUnreachable; ErrKVClosed; another error if JetStream refused
// the bucket (for instance more replicas than servers).
func (k *NATSKV) Provision(ctx context.Context) error {
	_, err := k.bucket(ctx)
	return err
}

func (k *NATSKV) bucket(ctx context.Context) (natsjs.KeyValue, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, ErrKVClosed
	}
	if k.kv != nil {
		return k.kv, nil
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	kv, err := k.js.CreateKeyValue(ctx, natsjs.KeyValueConfig{
		Bucket:      k.cfg.Bucket,
		Description: k.cfg.Description,
		History:     1,
		Replicas:    k.cfg.Replicas,
		Storage:     k.cfg.Storage,
	})
	if errors.Is(err, natsjs.ErrBucketExists) {
		// Made by someone else with another configuration: use it as it is.
		kv, err = k.js.KeyValue(ctx, k.cfg.Bucket)
	}
	if err != nil {
		return nil, kvError(err, "provisioning "+k.Name())
	}
	k.kv = kv
	return kv, nil
}

// bound gives ctx the handle's timeout unless it has a deadline.
func (k *NATSKV) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, k.cfg.Timeout)
}

// Create implements KV. The usual case — a key never stored, or whose
// last message is not a deletion — is one publish with the expected last
// sequence 0, its acknowledgement read by hand (nats.go decodes it with
// encoding/json, the larger part of its CPU per create). Any API error
// in the acknowledgement — the key exists, or was deleted and may be
// created again at its deletion's revision — is left to nats.go's
// Create, which tells the two apart; the server stored nothing then.
func (k *NATSKV) Create(ctx context.Context, key string, value []byte) (uint64, error) {
	if !KeyValid(key) {
		return 0, keyError(key)
	}
	kv, err := k.bucket(ctx)
	if err != nil {
		return 0, err
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	m := &nats.Msg{Subject: KVPutSubject(k.cfg.Domain, k.cfg.Bucket, key), Data: value, Header: nats.Header{}}
	m.Header[natsjs.ExpectedLastSubjSeqHeader] = []string{"0"}
	resp, err := k.cfg.Conn.RequestMsgWithContext(ctx, m)
	// No responders: the bucket's stream has no leader yet (a replicated
	// stream just created, or electing one). Asked again, as nats.go's
	// own publish asks again (250 ms apart), within the call's time.
	for try := 1; errors.Is(err, nats.ErrNoResponders) && try <= createRetries; try++ {
		select {
		case <-time.After(createRetryWait):
		case <-ctx.Done():
			return 0, kvError(natsjs.ErrNoStreamResponse, "create "+key+" in "+k.Name())
		}
		resp, err = k.cfg.Conn.RequestMsgWithContext(ctx, m)
	}
	if err != nil {
		if errors.Is(err, nats.ErrNoResponders) {
			err = natsjs.ErrNoStreamResponse
		}
		return 0, kvError(err, "create "+key+" in "+k.Name())
	}
	if seq, ok := pubAckSequence(resp.Data); ok {
		return seq, nil
	}
	rev, err := kv.Create(ctx, key, value)
	return rev, kvError(err, "create "+key+" in "+k.Name())
}

// createRetries and createRetryWait bound how often, and how far apart, a
// create nobody answered is sent again.
const (
	createRetries   = 8
	createRetryWait = 250 * time.Millisecond
)

// pubAckSequence returns the sequence of a JetStream publish
// acknowledgement, {"stream":…,"seq":N,…}; false for an error
// ({…,"error":{…}}) or anything else. The names in an acknowledgement
// (stream, domain) hold no quote, colon or brace, so the two keys cannot
// be mistaken for parts of a value.
func pubAckSequence(b []byte) (uint64, bool) {
	if bytes.Contains(b, []byte(`"error":{`)) {
		return 0, false
	}
	i := bytes.Index(b, []byte(`"seq":`))
	if i < 0 {
		return 0, false
	}
	b = b[i+len(`"seq":`):]
	var seq uint64
	n := 0
	for n < len(b) && b[n] >= '0' && b[n] <= '9' {
		if seq > (math.MaxUint64-9)/10 {
			return 0, false
		}
		seq = seq*10 + uint64(b[n]-'0')
		n++
	}
	return seq, n > 0 && seq > 0
}

// GetMany implements KV with one direct-get request for the last message of
// every key's subject (JetStream's multi_last batch get).
func (k *NATSKV) GetMany(ctx context.Context, keys []string) (map[string]KVEntry, error) {
	for _, key := range keys {
		if !KeyValid(key) {
			return nil, keyError(key)
		}
	}
	if len(keys) == 0 {
		return map[string]KVEntry{}, nil
	}
	if _, err := k.bucket(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	got, err := k.getter.getMany(ctx, keys)
	if err != nil {
		return nil, kvError(err, "get from "+k.Name())
	}
	return got, nil
}

// Delete implements KV.
func (k *NATSKV) Delete(ctx context.Context, key string, revision uint64) error {
	if !KeyValid(key) {
		return keyError(key)
	}
	if revision == 0 {
		return fmt.Errorf("%w: delete %s without a revision", ErrRevisionMismatch, key)
	}
	kv, err := k.bucket(ctx)
	if err != nil {
		return err
	}
	ctx, cancel := k.bound(ctx)
	defer cancel()
	return kvError(kv.Delete(ctx, key, natsjs.LastRevision(revision)), "delete "+key+" from "+k.Name())
}

// MaxKeyLen is the longest KV key: made into a subject, with the bucket's
// and JetStream's prefixes and a reply subject, a longer one could exceed
// the 4096-byte protocol line of a NATS server, which answers "maximum
// control line exceeded" and drops the connection.
const MaxKeyLen = 3072

// KeyValid reports whether key is a valid KV key (see KV): at most
// MaxKeyLen bytes.
func KeyValid(key string) bool {
	if key == "" || len(key) > MaxKeyLen || key[0] == '.' || key[len(key)-1] == '.' || strings.Contains(key, "..") {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '-', c == '_', c == '=', c == '/', c == '.':
		default:
			return false
		}
	}
	return true
}

func bucketValid(b string) bool {
	if b == "" {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// kvSubjectPrefix is the prefix of a bucket's subjects: "$KV.<bucket>.".
func kvSubjectPrefix(bucket string) string { return "$KV." + bucket + "." }

// KVPutSubject is where a value of key in bucket of JetStream domain
// domain is published directly (with headers KV's API does not take, as
// Nats-TTL): the bucket's subject through the domain's API prefix, as
// nats.go's KV does for a bucket of another domain.
func KVPutSubject(domain, bucket, key string) string {
	return "$JS." + domain + ".API.$KV." + bucket + "." + key
}
