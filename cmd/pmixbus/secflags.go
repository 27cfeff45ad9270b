package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"slices"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/cluster"
	"github.com/pmixbus/pmixbus/security"
)

// keysDirHelp documents --keys.
const keysDirHelp = "`dir` of the NATS keys, one file per role, created 0600 on first start (default $PMIXBUS_KEYS, else <user config dir>/pmixbus/keys; see docs/security.md)"

// defaultKeysDir is where keys are unless --keys says otherwise; "" when
// the system has no place for them.
func defaultKeysDir() string {
	d, _ := security.DefaultDir()
	return d
}

// defaultKeyFile is role's key file in the default keys directory, or ""
// when the system has none.
func defaultKeyFile(r security.Role) string {
	if d := defaultKeysDir(); d != "" {
		return security.KeyFile(d, r)
	}
	return ""
}

// keysDir returns the --keys value, or the default, or an error naming
// the flag.
func keysDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	if d, err := security.DefaultDir(); err == nil {
		return d, nil
	}
	return "", fmt.Errorf("--keys: no default directory for the keys on this system; give one (or set %s)", security.EnvKeysDir)
}

// leafTLSFlags are the flags of a server's leaf-link TLS.
type leafTLSFlags struct {
	cert, key, ca *string
	verify        *bool
}

func addLeafTLSFlags(fs *flag.FlagSet) *leafTLSFlags {
	return &leafTLSFlags{
		cert:   fs.String("leaf-tls-cert", "", "PEM `file` of this server's certificate for leaf links: shown to leaf nodes on --leaf-port, and to the hub by --leaf-remote links (with --leaf-tls-key)"),
		key:    fs.String("leaf-tls-key", "", "PEM `file` of the private key of --leaf-tls-cert"),
		ca:     fs.String("leaf-tls-ca", "", "PEM `file` of the CA that signs the other ends' certificates: --leaf-remote links verify the hub's with it, and with --leaf-tls-verify the leaf port verifies the leaves'. Any --leaf-tls flag puts the leaf links on TLS"),
		verify: fs.Bool("leaf-tls-verify", false, "the leaf port requires a certificate signed by --leaf-tls-ca from every leaf node (mutual TLS)"),
	}
}

// config returns the LeafTLS the flags give, or nil when none was given.
func (f *leafTLSFlags) config() *cluster.LeafTLS {
	if *f.cert == "" && *f.key == "" && *f.ca == "" && !*f.verify {
		return nil
	}
	return &cluster.LeafTLS{Cert: *f.cert, Key: *f.key, CA: *f.ca, Verify: *f.verify}
}

// given reports whether any of the flags was set.
func (f *leafTLSFlags) given() bool { return f.config() != nil }

// toolKey returns the option that signs a tool in with the key in file,
// the --nkey value (explicit tells whether it was given), and a
// description of the identity for messages. When file was not given and
// does not exist, the tool connects without a key, which only a server
// without auth takes.
func toolKey(file string, explicit bool) (nats.Option, string, error) {
	if file == "" {
		return nil, "no key", nil
	}
	opt, err := security.FileOption(file)
	switch {
	case err == nil:
		return opt, "the key in " + file, nil
	case errors.Is(err, fs.ErrNotExist) && !explicit:
		return nil, "no key (none at " + file + ")", nil
	}
	return nil, "", fmt.Errorf("--nkey: %w", err)
}

// connectTool connects a tool to url, signed in with key when there is
// one. A server without authentication makes nats.go refuse to sign in;
// the tool then connects without the key, which gives nothing away
// (nkeys never show the seed), and says so on stderr when the key was
// asked for (explicit).
func connectTool(url string, key nats.Option, explicit bool, stderr io.Writer, name string, opts ...nats.Option) (*nats.Conn, error) {
	if key == nil {
		return nats.Connect(url, opts...)
	}
	nc, err := nats.Connect(url, append(slices.Clone(opts), key)...)
	if errors.Is(err, nats.ErrNkeysNotSupported) {
		if explicit {
			fmt.Fprintf(stderr, "pmixbus %s: %s has no authentication; connecting without the key\n", name, url)
		}
		return nats.Connect(url, opts...)
	}
	return nc, err
}

// asyncErrors reports the connection's asynchronous errors on stderr as
// the tool's own, leaving out permission violations: the tools check for
// those after a flush (nats.Conn.LastError) and fail with a message of
// their own.
func asyncErrors(stderr io.Writer, name string) nats.Option {
	return nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if !errors.Is(err, nats.ErrPermissionViolation) {
			fmt.Fprintf(stderr, "pmixbus %s: %v\n", name, err)
		}
	})
}

// refused returns the permission violation the server reported on nc, if
// any: call it after a flush, which the server answers after reporting.
func refused(nc *nats.Conn) error {
	if err := nc.LastError(); errors.Is(err, nats.ErrPermissionViolation) {
		return err
	}
	return nil
}

// authHint explains a refused sign-in.
func authHint(err error, identity string) string {
	if errors.Is(err, nats.ErrAuthorization) {
		return fmt.Sprintf(" (signed in with %s; a secured server wants the key of a role allowed to do this: give --nkey, see docs/security.md)", identity)
	}
	return ""
}
