package cabi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The tests build libpmix.so.2 once per test binary, compile C programs
// from testdata against it with the system C compiler, and run them as
// subprocesses.

// debianInclude is where Debian's libpmix-dev puts OpenPMIx 4.2.2's
// headers; the tests that compile against the real headers skip without.
const debianInclude = "/usr/lib/x86_64-linux-gnu/pmix2/include"

var lib struct {
	once sync.Once
	dir  string // holds libpmix.so.2 and the libpmix.so link to it
	err  error
}

var scratch string // removed after the tests

// sanitize (PMIXBUS_CABI_SANITIZE set, as .ci/run does) builds the library
// and every C program with AddressSanitizer and UBSan: a program that
// reads or writes out of bounds, uses freed memory or leaks fails its
// test (LeakSanitizer reports what is definitely lost at exit).
var sanitize = os.Getenv("PMIXBUS_CABI_SANITIZE") != ""

// sanitizeFlags are the compiler flags of sanitize.
var sanitizeFlags = []string{"-g", "-O1", "-fno-omit-frame-pointer", "-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cabi")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	scratch = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// libDir builds the library on first use and returns its directory.
func libDir(t testing.TB) string {
	t.Helper()
	needCC(t)
	lib.once.Do(func() {
		lib.dir = filepath.Join(scratch, "lib")
		// The C library, built by the repository's Makefile as `make`
		// builds lib/libpmix.so.2, into the test's own directory.
		lib.err = makeInto(lib.dir, "lib")
	})
	if lib.err != nil {
		t.Fatal(lib.err)
	}
	return lib.dir
}

// makeInto runs the repository's Makefile for target with LIBDIR=dir,
// with the sanitizers' flags under sanitize.
func makeInto(dir, target string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := []string{"-s", "-C", "..", "LIBDIR=" + dir, target}
	if sanitize {
		args = append(args, "CFLAGS="+strings.Join(sanitizeFlags, " "))
	}
	if b, err := exec.CommandContext(ctx, "make", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("make %s: %v\n%s", target, err, b)
	}
	return nil
}

func needCC(t testing.TB) string {
	t.Helper()
	cc := os.Getenv("CC")
	if cc == "" {
		cc = "gcc"
	}
	for _, tool := range []string{cc, "make"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s: libpmix.so.2 cannot be built: %v", tool, err)
		}
	}
	if _, err := os.Stat("/usr/include/msgpuck.h"); err != nil {
		t.Skipf("msgpuck.h is not installed (apt-get install libmsgpuck-dev): libpmix.so.2 cannot be built")
	}
	return cc
}

// header is a set of PMIx headers a test program is compiled against.
type header struct {
	name string
	dir  string
}

// headers returns this package's headers, and Debian's when installed.
func headers(t testing.TB) []header {
	hs := []header{{"pmixbus", "include"}}
	if _, err := os.Stat(filepath.Join(debianInclude, "pmix.h")); err == nil {
		hs = append(hs, header{"openpmix-4.2.2", debianInclude})
	} else {
		t.Logf("Debian's libpmix-dev is not installed (%s): compiling against pmixbus's header only", debianInclude)
	}
	return hs
}

// compile builds testdata/src (a path relative to testdata) against the headers h, linked with
// -lpmix against the library when link is set, and returns the binary.
func compile(t testing.TB, src string, h header, link bool) string {
	t.Helper()
	return compileWith(t, src, h, link)
}

// compileWith is compile with extra compiler flags.
func compileWith(t testing.TB, src string, h header, link bool, flags ...string) string {
	t.Helper()
	cc := needCC(t)
	abs, err := filepath.Abs(h.dir)
	if err != nil {
		t.Fatal(err)
	}
	// Read what gcc will, so that go test's cache sees a change to it.
	for _, f := range []string{filepath.Join("testdata", src), "testdata/check.h", "testdata/datacheck.h", "testdata/waitcb.h", "include/pmix.h", "include/pmix_common.h"} {
		if _, err := os.ReadFile(f); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c")+"-"+h.name)
	args := append([]string{"-std=gnu11", "-Wall", "-Werror", "-I", abs, filepath.Join("testdata", src), "-o", bin, "-lpthread"}, flags...)
	if sanitize {
		args = append(args, sanitizeFlags...)
	}
	if link {
		args = append(args, "-L", libDir(t), "-lpmix")
	}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return bin
}

// compileAsOpenPMIxUser builds testdata/src as a user of Debian's
// libpmix-dev would: its headers, linked against its library with a
// RUNPATH, as pkg-config's flags give. It skips t without libpmix-dev.
func compileAsOpenPMIxUser(t testing.TB, src string) string {
	t.Helper()
	if hs := headers(t); len(hs) < 2 {
		t.Skip("Debian's libpmix-dev is not installed")
	}
	cc := needCC(t)
	debLib := filepath.Join(filepath.Dir(debianInclude), "lib")
	bin := filepath.Join(t.TempDir(), strings.TrimSuffix(filepath.Base(src), ".c")+"-openpmix-linked")
	args := []string{"-I", debianInclude, filepath.Join("testdata", src), "-o", bin,
		"-L", debLib, "-Wl,-rpath", "-Wl," + debLib, "-Wl,--enable-new-dtags", "-lpmix"}
	if sanitize {
		args = append(args, sanitizeFlags...)
	}
	if b, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", cc, strings.Join(args, " "), err, b)
	}
	return bin
}

// cmdEnv is the environment of a test program: this process's without any
// PMIx identity, the library first on LD_LIBRARY_PATH (unless extra sets
// it), and extra.
func cmdEnv(t testing.TB, extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "PMIX") || strings.HasPrefix(kv, "LD_LIBRARY_PATH=") {
			continue
		}
		env = append(env, kv)
	}
	if _, ok := extra["LD_LIBRARY_PATH"]; !ok {
		env = append(env, "LD_LIBRARY_PATH="+libDir(t))
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// run runs bin to completion and returns its standard output.
func run(t testing.TB, ctx context.Context, bin string, env map[string]string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = cmdEnv(t, env)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\nstdout:\n%s\nstderr:\n%s", filepath.Base(bin), args, err, out, stderr.String())
	}
	return string(out)
}

// buildGo builds the Go program pkg (a path relative to this package)
// and returns the binary.
func buildGo(t testing.TB, pkg string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	if b, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, b)
	}
	return bin
}
