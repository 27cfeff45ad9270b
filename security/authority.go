package security

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	natsjs "github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/subjects"
)

// JobKeysBucket is the KV bucket (in each cluster's domain) that binds
// each job's nspace to the public key of the job key that first signed
// in for it.
const JobKeysBucket = "PMIXBUS_JOBKEYS"

// JobKeysMaxAge is how long the bucket keeps a binding: longer than a
// job runs. A connection admitted once keeps its permissions however
// long it lives; only a new sign-in after that (a reconnect) binds
// again, and gets the nspace unless another job key took it meanwhile.
// A binding whose job no longer runs is taken over by the next job key
// that signs in for that nspace.
const JobKeysMaxAge = 30 * 24 * time.Hour

// jobsBucket is package launch's bucket of running jobs (JobsStream's).
const jobsBucket = "PMIXBUS_JOBS"

// JobClaims binds jobs to job keys.
type JobClaims interface {
	// Claim binds nspace to the job key owner, unless it is bound to
	// another: ErrJobClaimed then.
	Claim(ctx context.Context, nspace, owner string) error
}

// JobAuthority is the authorization service of the servers (NATS's auth
// callout): it admits a connection signed in with a JobCredential, as
// its job only (JobPermissions), and refuses any other. Safe for
// concurrent use.
type JobAuthority struct {
	issuer   nkeys.KeyPair
	launcher nkeys.KeyPair // public only: whose signature vouches for job keys
	claims   JobClaims
	log      *slog.Logger
}

// JobAuthority returns the authorization service for servers accepting
// k's roles, binding jobs in claims (nil: the JobKeysBucket of the
// server the service's connection reaches).
//
// Errors: one wrapping ErrNoKey when k lacks the agent or launcher key.
func (k *Keys) JobAuthority(claims JobClaims, log *slog.Logger) (*JobAuthority, error) {
	if missing := k.missing([]Role{RoleAgent, RoleLauncher}); len(missing) > 0 {
		return nil, fmt.Errorf("%w: the job authority needs %v", ErrNoKey, missing)
	}
	seed, err := k.kps[RoleAgent].Seed()
	if err != nil {
		return nil, fmt.Errorf("security: the agent key: %w", err)
	}
	issuer, err := jobIssuer(seed)
	if err != nil {
		return nil, fmt.Errorf("security: the job issuer: %w", err)
	}
	pub, _ := k.kps[RoleLauncher].PublicKey()
	launcher, err := nkeys.FromPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("security: the launcher key: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &JobAuthority{issuer: issuer, launcher: launcher, claims: claims, log: log}, nil
}

// Issuer is the public account key the service signs with: the servers'
// AuthCallout.Issuer.
func (a *JobAuthority) Issuer() string {
	pub, _ := a.issuer.PublicKey()
	return pub
}

// Serve answers the servers' authorization requests that reach nc (one
// of a queue group: several servers' services share the work) until nc
// closes. nc must be signed in with a key the servers do not ask about
// (AuthCallout.AuthUsers), allowed to subscribe to AuthCalloutSubject and
// to publish on "$SYS._INBOX.>".
//
// Errors: what subscribing returns.
func (a *JobAuthority) Serve(nc *nats.Conn) (*nats.Subscription, error) {
	claims := a.claims
	if claims == nil {
		claims = &kvJobClaims{nc: nc}
	}
	return nc.QueueSubscribe(AuthCalloutSubject, "pmixbus-job-authority", func(m *nats.Msg) {
		if err := a.answer(m, claims); err != nil {
			a.log.Warn("answering an authorization request", "err", err)
		}
	})
}

// answer answers one authorization request: a user JWT, or the reason
// the connection is refused.
func (a *JobAuthority) answer(m *nats.Msg, claims JobClaims) error {
	req, err := jwt.DecodeAuthorizationRequestClaims(string(m.Data))
	if err != nil {
		return fmt.Errorf("a request that does not decode: %w", err)
	}
	if !nkeys.IsValidPublicServerKey(req.Issuer) {
		return fmt.Errorf("a request not signed by a server (%s)", req.Issuer)
	}
	// The server waits until the request expires (its auth timeout):
	// binding the job must be done by then.
	deadline := time.Now().Add(2 * time.Second)
	if req.Expires > 0 {
		deadline = time.Unix(req.Expires, 0)
	}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	res := jwt.NewAuthorizationResponseClaims(req.UserNkey)
	res.Audience = req.Server.ID
	user, err := a.authorize(ctx, &req.AuthorizationRequest, claims)
	if err != nil {
		res.Error = err.Error()
		a.log.Info("refused a connection", "name", req.ConnectOptions.Name, "host", req.ClientInformation.Host, "why", err)
	} else {
		res.Jwt = user
	}
	token, err := res.Encode(a.issuer)
	if err != nil {
		return fmt.Errorf("signing the answer: %w", err)
	}
	return m.Respond([]byte(token))
}

// authorize checks a connection's job credential and returns the JWT of
// the job user it is admitted as.
//
// Errors: one saying why the credential is not good; ErrJobClaimed.
func (a *JobAuthority) authorize(ctx context.Context, req *jwt.AuthorizationRequest, claims JobClaims) (string, error) {
	co := req.ConnectOptions
	if co.Nkey == "" || co.SignedNonce == "" || !nkeys.IsValidPublicUserKey(co.Nkey) {
		return "", errors.New("no pmixbus key and no job credential")
	}
	sig, err := base64.RawURLEncoding.DecodeString(co.SignedNonce)
	if err != nil {
		return "", errors.New("a nonce signature that does not decode")
	}
	jobKey, err := nkeys.FromPublicKey(co.Nkey)
	if err == nil {
		err = jobKey.Verify([]byte(req.ClientInformation.Nonce), sig)
	}
	if err != nil {
		return "", errors.New("the key did not sign the server's nonce")
	}
	nspace := co.Username
	if err := checkJobName(nspace); err != nil {
		return "", fmt.Errorf("an unknown key, and no job credential: %w", err)
	}
	proof, err := base64.RawURLEncoding.DecodeString(co.Password)
	if err == nil {
		err = a.launcher.Verify(jobProofMessage(nspace, co.Nkey), proof)
	}
	if err != nil {
		return "", fmt.Errorf("an unknown key, not vouched for by the launcher key for job %s", nspace)
	}
	if err := claims.Claim(ctx, nspace, co.Nkey); err != nil {
		return "", err
	}
	uc := jwt.NewUserClaims(req.UserNkey)
	uc.Name = "job " + nspace
	uc.Audience = server.DEFAULT_GLOBAL_ACCOUNT // config mode: the account to place the user in
	uc.AllowedConnectionTypes = jwt.StringList{jwt.ConnectionTypeStandard}
	uc.Permissions = jwtPermissions(JobPermissions(nspace))
	return uc.Encode(a.issuer)
}

// jwtPermissions is p in a user JWT's terms.
func jwtPermissions(p *server.Permissions) jwt.Permissions {
	var out jwt.Permissions
	if p.Publish != nil {
		out.Pub.Allow.Add(p.Publish.Allow...)
		out.Pub.Deny.Add(p.Publish.Deny...)
	}
	if p.Subscribe != nil {
		out.Sub.Allow.Add(p.Subscribe.Allow...)
		out.Sub.Deny.Add(p.Subscribe.Deny...)
	}
	if p.Response != nil {
		out.Resp = &jwt.ResponsePermission{MaxMsgs: p.Response.MaxMsgs, Expires: p.Response.Expires}
	}
	return out
}

// kvJobClaims binds jobs in the JobKeysBucket of nc's domain, made on
// first use with cluster.DefaultReplicas copies.
type kvJobClaims struct {
	nc *nats.Conn
	mu sync.Mutex
	kv natsjs.KeyValue
}

func (c *kvJobClaims) bucket(ctx context.Context) (natsjs.KeyValue, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.kv != nil {
		return c.kv, nil
	}
	js, err := natsjs.New(c.nc)
	if err != nil {
		return nil, err
	}
	kv, err := js.KeyValue(ctx, JobKeysBucket)
	if errors.Is(err, natsjs.ErrBucketNotFound) {
		kv, err = js.CreateOrUpdateKeyValue(ctx, natsjs.KeyValueConfig{
			Bucket:      JobKeysBucket,
			Description: "pmixbus: the job key each job's nspace is bound to (security)",
			History:     1,
			TTL:         JobKeysMaxAge,
			Storage:     natsjs.FileStorage,
			Replicas:    cluster.DefaultReplicas(c.nc),
		})
	}
	if err != nil {
		return nil, err
	}
	c.kv = kv
	return kv, nil
}

// Claim binds nspace to owner when no key is bound to it, or when the
// key bound to it runs no job of it (its launcher is gone: the jobs
// bucket, package launch's, has no key for it), so that a finished
// job's nspace can be used again.
func (c *kvJobClaims) Claim(ctx context.Context, nspace, owner string) error {
	kv, err := c.bucket(ctx)
	if err != nil {
		return fmt.Errorf("the job keys bucket: %w", err)
	}
	key := subjects.EscapeToken(nspace)
	_, err = kv.Create(ctx, key, []byte(owner))
	if !errors.Is(err, natsjs.ErrKeyExists) {
		if err != nil {
			return fmt.Errorf("binding job %s: %w", nspace, err)
		}
		return nil
	}
	e, err := kv.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("binding job %s: %w", nspace, err)
	}
	if string(e.Value()) == owner {
		return nil // the same job key signing in again
	}
	if runs, err := c.jobRuns(ctx, key); err != nil || runs {
		return fmt.Errorf("%w: %s", ErrJobClaimed, nspace)
	}
	if _, err := kv.Update(ctx, key, []byte(owner), e.Revision()); err != nil {
		return fmt.Errorf("%w: %s", ErrJobClaimed, nspace) // another key took it meanwhile
	}
	return nil
}

// jobRuns reports whether the jobs bucket holds the key of job key.
func (c *kvJobClaims) jobRuns(ctx context.Context, key string) (bool, error) {
	js, err := natsjs.New(c.nc)
	if err != nil {
		return false, err
	}
	jobs, err := js.KeyValue(ctx, jobsBucket)
	if errors.Is(err, natsjs.ErrBucketNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	_, err = jobs.Get(ctx, key)
	if errors.Is(err, natsjs.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}
