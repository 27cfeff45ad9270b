package security

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/pmixbus/pmixbus/subjects"
)

// Per-job credentials (docs/security.md, "Credentials per job"). A
// launcher does not use the launcher key on NATS for a job: it makes a
// fresh nkey for the job (the job key), signs "this job key is for job
// N" with the launcher key, and signs in with the job key. The servers
// do not know the job key, so they ask their authorization service
// (NATS's auth callout, JobAuthority), which checks both signatures,
// binds N to that job key for good (a second job key for N is refused),
// and admits the connection with JobPermissions(N): what it may publish
// is its own job's, and a forged event for another job is a permission
// violation at the server.

// AuthCalloutSubject is where nats-server asks its authorization
// service about a connection (server.AuthCalloutSubject).
const AuthCalloutSubject = server.AuthCalloutSubject

// authReplies are the subjects the servers await the service's answers
// on (their internal inboxes).
const authReplies = "$SYS._INBOX.>"

// JobInboxPrefix is the inbox prefix of a job credential's connection:
// the replies to its own requests, and no other job's.
func JobInboxPrefix(nspace string) string {
	return "_PMIXBUS.job." + subjects.EscapeToken(nspace)
}

// JobPermissions returns the NATS permissions of a connection signed in
// with a job credential for nspace: the launcher's, narrowed to that job.
// It publishes control requests for its job only (spawn, kill, stdin:
// pmix.ctl.<cluster>.<node>.<op>.<nspace>; the read-only "jobs"), events
// on its job's nspace subjects (PMIX_EVENT_JOB_END), and its job's key of
// the jobs buckets; it reads the agents buckets and the output stream as
// the watch role does; it receives its job's process ends, spawn
// requests and output, on its own inbox.
func JobPermissions(nspace string) *server.Permissions {
	n := subjects.EscapeToken(nspace)
	pub := append(launcherReads(), subjects.Prefix+".*.ns."+n+".>",
		"$KV.PMIXBUS_JOBS."+n, "$JS.*.API.$KV.PMIXBUS_JOBS."+n)
	for _, op := range JobControlOps() {
		pub = append(pub, ControlPrefix+".*.*."+op+"."+n)
	}
	return &server.Permissions{
		Publish: &server.SubjectPermission{Allow: pub},
		Subscribe: &server.SubjectPermission{Allow: []string{
			jobStatePrefix + ".*." + n, jobStatePrefix + ".*." + n + ".>",
			jobOutputPrefix + ".*." + n + ".>",
			JobInboxPrefix(nspace) + ".>",
		}},
		Response: &server.ResponsePermission{MaxMsgs: 1, Expires: 5 * time.Minute},
	}
}

// ControlPrefix roots the control requests to agents (package launch's
// ControlPrefix, named here so that security imports nothing above it).
const ControlPrefix = "pmix.ctl"

// JobControlOps are the control operations that act on one job: their
// subject ends with the job's nspace, which the agent checks against the
// request's, so that a job credential reaches its own job only.
func JobControlOps() []string { return []string{"spawn", "kill", "stdin"} }

const (
	jobStatePrefix  = "pmix.jobstate"
	jobOutputPrefix = "pmix.iof"
)

// JobCredential is what a launcher signs in with for one job: a fresh
// job key, vouched for by the launcher key. Safe for concurrent use.
type JobCredential struct {
	nspace string
	kp     nkeys.KeyPair
	proof  string
}

// JobCredential makes a fresh job key for nspace, vouched for by k's
// launcher key.
//
// Errors: one wrapping ErrNoKey when k lacks the launcher key.
func (k *Keys) JobCredential(nspace string) (*JobCredential, error) {
	if !k.Has(RoleLauncher) {
		return nil, fmt.Errorf("%w: %s (a job credential is vouched for by it)", ErrNoKey, RoleLauncher)
	}
	return newJobCredential(k.kps[RoleLauncher], nspace)
}

// FileJobCredential is JobCredential with the launcher key in the file
// at path (a role's KeyFile, or any file with a user nkey seed).
//
// Errors: those of FileOption.
func FileJobCredential(path, nspace string) (*JobCredential, error) {
	kp, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return newJobCredential(kp, nspace)
}

func newJobCredential(launcher nkeys.KeyPair, nspace string) (*JobCredential, error) {
	if err := checkJobName(nspace); err != nil {
		return nil, err
	}
	kp, err := nkeys.CreateUser()
	if err != nil {
		return nil, fmt.Errorf("security: generating a job key: %w", err)
	}
	pub, _ := kp.PublicKey()
	sig, err := launcher.Sign(jobProofMessage(nspace, pub))
	if err != nil {
		return nil, fmt.Errorf("security: vouching for the job key: %w", err)
	}
	return &JobCredential{nspace: nspace, kp: kp, proof: base64.RawURLEncoding.EncodeToString(sig)}, nil
}

// checkJobName refuses an nspace no job can have.
func checkJobName(nspace string) error {
	if nspace == "" {
		return errors.New("security: a job credential for no nspace")
	}
	return subjects.CheckName("nspace", nspace)
}

// jobProofMessage is what the launcher key signs for job key pub.
func jobProofMessage(nspace, pub string) []byte {
	return []byte("pmixbus job credential v1\n" + nspace + "\n" + pub)
}

// Nspace is the job the credential is for.
func (c *JobCredential) Nspace() string { return c.nspace }

// PublicKey is the job key's public key: the one the servers bind the
// job to.
func (c *JobCredential) PublicKey() string {
	pub, _ := c.kp.PublicKey()
	return pub
}

// Option signs a NATS connection in with the credential: the job key
// signs the server's nonce, the user name is the nspace and the password
// the launcher key's signature; replies come to JobInboxPrefix. The
// connection may reconnect: the job stays bound to the same job key.
func (c *JobCredential) Option() nats.Option {
	return func(o *nats.Options) error {
		for _, opt := range []nats.Option{
			nats.Nkey(c.PublicKey(), c.kp.Sign),
			nats.UserInfo(c.nspace, c.proof),
			nats.CustomInboxPrefix(JobInboxPrefix(c.nspace)),
		} {
			if err := opt(o); err != nil {
				return err
			}
		}
		return nil
	}
}

// jobIssuer is the account key that signs the job users the
// authorization service admits, derived from the agent key's seed: every
// server and agent of a deployment holds it and so knows the issuer
// without one more key file, and no one without the agent key can
// make one.
func jobIssuer(agentSeed []byte) (nkeys.KeyPair, error) {
	mac := hmac.New(sha256.New, agentSeed)
	mac.Write([]byte("pmixbus job issuer v1"))
	return nkeys.FromRawSeed(nkeys.PrefixByteAccount, mac.Sum(nil))
}
