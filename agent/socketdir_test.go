package agent

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pmixbus/pmixbus/pmix"
)

// The default socket's directory is made 0700 and refused when another
// user could have made it theirs: open to others, not a directory, a
// link, another user's.
func TestPrivateSocketDir(t *testing.T) {
	base := t.TempDir()
	fresh := filepath.Join(base, "fresh")
	if err := privateDir(fresh, -1); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v, %v; want 0700", fi.Mode(), err)
	}
	if err := privateDir(fresh, -1); err != nil {
		t.Fatalf("its own directory, again: %v", err)
	}

	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(base, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{open: "open to others", file: "not a directory", link: "not a directory"}
	if os.Geteuid() == 0 {
		other := filepath.Join(base, "other")
		if err := os.Mkdir(other, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases[other] = "belongs to uid 65534"
	} else {
		t.Log("not root: the case of another user's directory is not made")
	}
	for dir, want := range cases {
		err := privateDir(dir, -1)
		if !errors.Is(err, pmix.ErrInit) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want PMIX_ERR_INIT saying %q", filepath.Base(dir), err, want)
		}
	}
}

func TestSocketDirFollowsXDGRuntimeDir(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_RUNTIME_DIR", dir)
	if got := SocketDir(); got != filepath.Join(dir, "pmixbus") {
		t.Errorf("SocketDir %s", got)
	}
	t.Setenv("XDG_RUNTIME_DIR", "relative")
	if got := SocketDir(); !strings.HasPrefix(got, os.TempDir()) {
		t.Errorf("with a relative XDG_RUNTIME_DIR: %s", got)
	}
}
