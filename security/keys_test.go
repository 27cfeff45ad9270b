package security_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/security"
)

// TestEnsureKeys: the first start writes a key per role, 0600 in a 0700
// directory; later starts, and concurrent ones, read the same keys.
func TestEnsureKeys(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keys")
	var wg sync.WaitGroup
	sets := make([]*security.Keys, 8)
	errs := make([]error, len(sets))
	for i := range sets {
		wg.Go(func() { sets[i], errs[i] = security.EnsureKeys(dir) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("EnsureKeys #%d: %v", i, err)
		}
	}
	again, err := security.EnsureKeys(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range security.Roles() {
		want, err := again.PublicKey(r)
		if err != nil {
			t.Fatal(err)
		}
		for i, k := range sets {
			if got, _ := k.PublicKey(r); got != want {
				t.Errorf("set %d has another %s key", i, r)
			}
		}
		if runtime.GOOS == "windows" {
			continue
		}
		fi, err := os.Stat(security.KeyFile(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %04o", fi.Name(), fi.Mode().Perm())
		}
		b, _ := os.ReadFile(security.KeyFile(dir, r))
		if !strings.Contains(string(b), want) || !strings.Contains(string(b), "\nSU") {
			t.Errorf("%s holds:\n%s", fi.Name(), b)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != len(security.Roles()) {
		t.Errorf("keys dir holds %d files, want one per role", len(entries))
	}
	if fi, _ := os.Stat(dir); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o700 {
		t.Errorf("keys dir mode %04o", fi.Mode().Perm())
	}
	if s := again.String(); s != "keys{agent,rm,watch,leaf,launcher}" {
		t.Errorf("String() = %q", s)
	}
}

// TestKeyFilesOthersMayRead: a key file others may read, or a keys dir
// others may write, is refused; a file without a seed too.
func TestKeyFilesOthersMayRead(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes")
	}
	dir := t.TempDir()
	if _, err := security.EnsureKeys(dir); err != nil {
		t.Fatal(err)
	}
	watch := security.KeyFile(dir, security.RoleWatch)
	if err := os.Chmod(watch, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := security.LoadKeys(dir); !errors.Is(err, security.ErrKeyFile) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("LoadKeys with a 0644 key = %v", err)
	}
	if _, err := security.FileOption(watch); !errors.Is(err, security.ErrKeyFile) {
		t.Errorf("FileOption of a 0644 key = %v", err)
	}
	if err := os.Chmod(watch, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := security.EnsureKeys(dir); !errors.Is(err, security.ErrKeyFile) || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("EnsureKeys on a 0777 dir = %v", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(watch, []byte("not a seed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := security.FileOption(watch); !errors.Is(err, security.ErrKeyFile) {
		t.Errorf("FileOption of a file without a seed = %v", err)
	}
	if _, err := security.FileOption(filepath.Join(dir, "absent.nk")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("FileOption of no file = %v", err)
	}
}

// TestLoadKeysPartial: a host may hold some roles' keys only; a missing
// directory holds none.
func TestLoadKeysPartial(t *testing.T) {
	full := t.TempDir()
	if _, err := security.EnsureKeys(full); err != nil {
		t.Fatal(err)
	}
	watchOnly := t.TempDir()
	b, err := os.ReadFile(security.KeyFile(full, security.RoleWatch))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(security.KeyFile(watchOnly, security.RoleWatch), b, 0o600); err != nil {
		t.Fatal(err)
	}
	k, err := security.LoadKeys(watchOnly)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Has(security.RoleWatch) || k.Has(security.RoleAgent) {
		t.Fatalf("loaded %v", k)
	}
	if _, err := k.ServerAuth(); !errors.Is(err, security.ErrNoKey) {
		t.Errorf("ServerAuth without every role = %v", err)
	}
	var o nats.Options
	if err := k.Option(security.RoleAgent)(&o); !errors.Is(err, security.ErrNoKey) {
		t.Errorf("Option of a missing role = %v", err)
	}
	none, err := security.LoadKeys(filepath.Join(t.TempDir(), "absent"))
	if err != nil || none.Has(security.RoleWatch) {
		t.Errorf("LoadKeys of no dir = %v, %v", none, err)
	}
	var nilKeys *security.Keys
	if err := nilKeys.Option(security.RoleAgent)(&o); err != nil || nilKeys.Has(security.RoleAgent) {
		t.Errorf("nil Keys: option %v", err)
	}
}

func TestDefaultDir(t *testing.T) {
	t.Setenv(security.EnvKeysDir, "/somewhere/keys")
	if d, err := security.DefaultDir(); d != "/somewhere/keys" || err != nil {
		t.Errorf("with %s: %q, %v", security.EnvKeysDir, d, err)
	}
	t.Setenv(security.EnvKeysDir, "")
	t.Setenv("XDG_CONFIG_HOME", "/cfg")
	if d, err := security.DefaultDir(); runtime.GOOS == "linux" && (d != "/cfg/pmixbus/keys" || err != nil) {
		t.Errorf("default: %q, %v", d, err)
	}
}

// TestNATSConf: the configuration block, read by nats-server, gives the
// same users, permissions and connection kinds as ServerAuth.
func TestNATSConf(t *testing.T) {
	keys, err := security.GenerateKeys()
	if err != nil {
		t.Fatal(err)
	}
	conf, err := keys.NATSConf()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "nats.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("nats-server reads:\n%s\n%v", conf, err)
	}
	auth, err := keys.ServerAuth()
	if err != nil {
		t.Fatal(err)
	}
	if len(opts.Nkeys) != len(auth.Users) {
		t.Fatalf("%d users read, want %d", len(opts.Nkeys), len(auth.Users))
	}
	for i, want := range auth.Users {
		got := opts.Nkeys[i]
		if got.Nkey != want.Nkey || !reflect.DeepEqual(got.Permissions, want.Permissions) || !reflect.DeepEqual(got.AllowedConnectionTypes, want.AllowedConnectionTypes) {
			t.Errorf("user %d: read %+v %+v %v\nwant %+v %+v %v", i, got, got.Permissions, got.AllowedConnectionTypes, want, want.Permissions, want.AllowedConnectionTypes)
		}
	}
	if c := opts.AuthCallout; c == nil || !reflect.DeepEqual(c, auth.Callout) {
		t.Errorf("auth callout read %+v, want %+v", c, auth.Callout)
	}
	if strings.Contains(conf, `"SU`) || strings.Contains(conf, `"SA`) {
		t.Error("the configuration holds a seed")
	}
}

// TestRoutePassword: servers given the same keys derive the same route
// password, and other keys another one.
func TestRoutePassword(t *testing.T) {
	dir := t.TempDir()
	if _, err := security.EnsureKeys(dir); err != nil {
		t.Fatal(err)
	}
	pass := func(dir string) string {
		k, err := security.LoadKeys(dir)
		if err != nil {
			t.Fatal(err)
		}
		a, err := k.ServerAuth()
		if err != nil {
			t.Fatal(err)
		}
		return a.RoutePassword
	}
	first, again := pass(dir), pass(dir)
	if first == "" || first != again {
		t.Fatalf("route passwords %q and %q from the same keys", first, again)
	}
	other := t.TempDir()
	if _, err := security.EnsureKeys(other); err != nil {
		t.Fatal(err)
	}
	if pass(other) == first {
		t.Fatal("other keys derive the same route password")
	}
}
