package security

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/pmixbus/pmixbus/cluster"
)

// EnvKeysDir names the environment variable that overrides DefaultDir.
const EnvKeysDir = "PMIXBUS_KEYS"

// KeyFileSuffix ends the name of a role's key file: "<role>.nk".
const KeyFileSuffix = ".nk"

// Keys holds one NATS nkey per role: the seed that signs a connection in
// as that role. A set may lack roles: a host that only watches holds the
// watch key alone. Keys is safe for concurrent use; the zero value and nil
// hold no key.
type Keys struct {
	kps map[Role]nkeys.KeyPair
}

// GenerateKeys returns a fresh key for every role, kept in memory only
// (tests, and worlds that start their own servers).
func GenerateKeys() (*Keys, error) {
	k := &Keys{kps: map[Role]nkeys.KeyPair{}}
	for _, r := range Roles() {
		kp, err := nkeys.CreateUser()
		if err != nil {
			return nil, fmt.Errorf("security: generating the %s key: %w", r, err)
		}
		k.kps[r] = kp
	}
	return k, nil
}

// DefaultDir is where keys live unless told otherwise: the directory
// named by $PMIXBUS_KEYS, else "pmixbus/keys" in the user's configuration
// directory (os.UserConfigDir: ~/.config/pmixbus/keys on Linux). Every
// server and tool of one user on one host finds the same keys there.
//
// Errors: the one os.UserConfigDir gives when neither is known.
func DefaultDir() (string, error) {
	if d := os.Getenv(EnvKeysDir); d != "" {
		return d, nil
	}
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("security: no directory for the keys (set %s): %w", EnvKeysDir, err)
	}
	return filepath.Join(d, "pmixbus", "keys"), nil
}

// KeyFile is the file of role r's key in dir.
func KeyFile(dir string, r Role) string { return filepath.Join(dir, string(r)+KeyFileSuffix) }

// LoadKeys reads the key of every role whose file (KeyFile) is in dir.
// A missing file, or a missing dir, is a role the set lacks.
//
// Errors: one wrapping ErrKeyFile for a file that others may read or
// that holds no user nkey seed; a directory or file that cannot be read.
func LoadKeys(dir string) (*Keys, error) {
	k := &Keys{kps: map[Role]nkeys.KeyPair{}}
	for _, r := range Roles() {
		kp, err := readKeyFile(KeyFile(dir, r))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		k.kps[r] = kp
	}
	return k, nil
}

// EnsureKeys makes dir hold a key for every role, generating those that
// are missing, and returns them all. The directory is created 0700 and
// each key file 0600. Processes that run it at once on one dir end up
// with the same keys: a file is written elsewhere and linked in place,
// and the first link wins.
//
// Errors: one wrapping ErrKeyFile for a directory that others may write
// or a key file that others may read; what the file system says.
func EnsureKeys(dir string) (*Keys, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("security: keys dir: %w", err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("security: keys dir: %w", err)
	}
	if checkModes() && fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("%w: keys dir %s is writable by others (mode %04o); chmod 700 it", ErrKeyFile, dir, fi.Mode().Perm())
	}
	for _, r := range Roles() {
		if _, err := os.Lstat(KeyFile(dir, r)); err == nil {
			continue
		}
		if err := writeKeyFile(dir, r); err != nil {
			return nil, err
		}
	}
	k, err := LoadKeys(dir)
	if err != nil {
		return nil, err
	}
	if missing := k.missing(Roles()); len(missing) > 0 {
		return nil, fmt.Errorf("%w: %v in %s", ErrNoKey, missing, dir)
	}
	return k, nil
}

// writeKeyFile generates role r's key into dir, unless another process
// wrote it first.
func writeKeyFile(dir string, r Role) error {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return fmt.Errorf("security: generating the %s key: %w", r, err)
	}
	defer kp.Wipe()
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	tmp, err := os.CreateTemp(dir, "."+string(r)+"-*") // mode 0600
	if err != nil {
		return fmt.Errorf("security: writing the %s key: %w", r, err)
	}
	defer os.Remove(tmp.Name())
	_, err = fmt.Fprintf(tmp, "# pmixbus %s key (a NATS nkey seed): whoever can read this file can sign in\n"+
		"# to pmixbus's NATS servers as %q. Keep it mode 0600. Public key:\n# %s\n%s\n", r, r, pub, seed)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Link(tmp.Name(), KeyFile(dir, r))
	}
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("security: writing the %s key: %w", r, err)
	}
	return nil
}

// readKeyFile reads a user nkey seed from path, which only its owner may
// read.
func readKeyFile(path string) (nkeys.KeyPair, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("security: key file: %w", err)
	}
	if checkModes() && fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s is open to others (mode %04o); chmod 600 it", ErrKeyFile, path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("security: key file: %w", err)
	}
	defer wipe(b)
	kp, err := nkeys.ParseDecoratedNKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrKeyFile, path, err)
	}
	if pub, _ := kp.PublicKey(); !nkeys.IsValidPublicUserKey(pub) {
		return nil, fmt.Errorf("%w: %s: not a user nkey seed", ErrKeyFile, path)
	}
	return kp, nil
}

// checkModes reports whether file modes mean what Unix says they mean.
func checkModes() bool { return runtime.GOOS != "windows" }

func wipe(b []byte) {
	for i := range b {
		b[i] = 'x'
	}
}

// FileOption reads the key in the file at path (a role's KeyFile, or any
// file with a user nkey seed, as the nats CLI's --nkey takes) and returns
// the option that signs a connection in with it.
//
// Errors: one wrapping fs.ErrNotExist when there is no such file; one
// wrapping ErrKeyFile for a file others may read or without a seed.
func FileOption(path string) (nats.Option, error) {
	kp, err := readKeyFile(path)
	if err != nil {
		return nil, err
	}
	return option(kp), nil
}

func option(kp nkeys.KeyPair) nats.Option {
	pub, _ := kp.PublicKey()
	return nats.Nkey(pub, kp.Sign)
}

// Has reports whether k holds role r's key.
func (k *Keys) Has(r Role) bool {
	if k == nil {
		return false
	}
	_, ok := k.kps[r]
	return ok
}

// PublicKey returns the public key of role r: what a server lists to
// accept it.
//
// Errors: one wrapping ErrNoKey when k lacks r.
func (k *Keys) PublicKey(r Role) (string, error) {
	if !k.Has(r) {
		return "", fmt.Errorf("%w: %s", ErrNoKey, r)
	}
	return k.kps[r].PublicKey()
}

// Option signs a NATS connection in as role r. On nil Keys it does
// nothing: the connection presents no key, which a server without auth
// takes. When k lacks r, connecting fails with an error wrapping
// ErrNoKey.
func (k *Keys) Option(r Role) nats.Option {
	switch {
	case k == nil:
		return func(*nats.Options) error { return nil }
	case !k.Has(r):
		return func(*nats.Options) error { return fmt.Errorf("%w: %s", ErrNoKey, r) }
	}
	return option(k.kps[r])
}

// ServerAuth returns the auth of servers that accept the roles of k, each
// with its Permissions and connection kinds, sign their leaf links in as
// RoleLeaf and check their own readiness as RoleAgent (see cluster.Auth).
//
// Errors: one wrapping ErrNoKey when k lacks a role.
func (k *Keys) ServerAuth() (*cluster.Auth, error) {
	if missing := k.missing(Roles()); len(missing) > 0 {
		return nil, fmt.Errorf("%w: a server needs every role's key; missing %v", ErrNoKey, missing)
	}
	auth := &cluster.Auth{Client: k.Option(RoleAgent)}
	for _, r := range Roles() {
		pub, _ := k.kps[r].PublicKey()
		auth.Users = append(auth.Users, &server.NkeyUser{
			Nkey:                   pub,
			Permissions:            Permissions(r),
			AllowedConnectionTypes: connectionTypes(r),
		})
	}
	seed, err := k.kps[RoleLeaf].Seed()
	if err != nil {
		return nil, fmt.Errorf("security: the leaf key: %w", err)
	}
	auth.LeafSeed = string(seed)
	auth.RoutePassword = routePassword(seed)
	ja, err := k.JobAuthority(nil, nil)
	if err != nil {
		return nil, err
	}
	// Every role keeps its own permissions; any other sign-in is a job
	// credential, or refused, as the servers' own service says.
	auth.Callout = &server.AuthCallout{Issuer: ja.Issuer(), Account: server.DEFAULT_GLOBAL_ACCOUNT}
	for _, u := range auth.Users {
		auth.Callout.AuthUsers = append(auth.Callout.AuthUsers, u.Nkey)
	}
	auth.Authorizer = func(nc *nats.Conn) error {
		_, err := ja.Serve(nc)
		return err
	}
	return auth, nil
}

// routePassword is the password the routes between servers sharing these
// keys authenticate with: derived from the leaf key's seed, which every
// server of a deployment holds, so that servers started on their own
// (pmixbus server --route) form a cluster with no secret of their own to
// distribute, and no one without the keys can join it.
func routePassword(leafSeed []byte) string {
	mac := hmac.New(sha256.New, leafSeed)
	mac.Write([]byte("pmixbus route password v1"))
	return base64.RawURLEncoding.EncodeToString(mac.Sum(nil))
}

// missing returns the roles of want that k lacks.
func (k *Keys) missing(want []Role) []Role {
	var out []Role
	for _, r := range want {
		if !k.Has(r) {
			out = append(out, r)
		}
	}
	return out
}

// String names the roles k holds, never a secret.
func (k *Keys) String() string {
	var held []string
	for _, r := range Roles() {
		if k.Has(r) {
			held = append(held, string(r))
		}
	}
	return "keys{" + strings.Join(held, ",") + "}"
}
