package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// runCmd runs the pmixbus command line args in-process.
func runCmd(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRun(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{name: "no args", args: nil, wantCode: 2, wantStderr: []string{"no command given", "Usage: pmixbus"}},
		{name: "-h", args: []string{"-h"}, wantStdout: []string{"Usage: pmixbus", "server", "version"}},
		{name: "--help", args: []string{"--help"}, wantStdout: []string{"Usage: pmixbus"}},
		{name: "help", args: []string{"help"}, wantStdout: []string{"Usage: pmixbus"}},
		{name: "help server", args: []string{"help", "server"}, wantStdout: []string{"Usage: pmixbus server", "-leaf-remote"}},
		{name: "help unknown", args: []string{"help", "frob"}, wantCode: 2, wantStderr: []string{`unknown command "frob"`}},
		{name: "unknown command", args: []string{"frob"}, wantCode: 2, wantStderr: []string{`unknown command "frob"`, "pmixbus -h"}},
		{name: "unknown top-level flag", args: []string{"--frob"}, wantCode: 2, wantStderr: []string{`unknown flag "--frob"`}},
		{name: "version", args: []string{"version"}, wantStdout: []string{"pmixbus ", "nats-server v", "nats.go v"}},
		{name: "version extra argument", args: []string{"version", "now"}, wantCode: 2, wantStderr: []string{`pmixbus version: unexpected argument "now"`}},
		{name: "version bad flag", args: []string{"version", "--short"}, wantCode: 2, wantStderr: []string{"flag provided but not defined: -short"}},
		{name: "server bad flag", args: []string{"server", "--nope"}, wantCode: 2, wantStderr: []string{"pmixbus server: flag provided but not defined: -nope", "pmixbus server -h"}},
		{name: "server bad port", args: []string{"server", "--port", "x"}, wantCode: 2, wantStderr: []string{`invalid value "x" for flag -port`}},
		{name: "server port out of range", args: []string{"server", "--port", "70000"}, wantCode: 2, wantStderr: []string{"Port: 70000 out of range"}},
		{name: "server port zero", args: []string{"server", "--port", "0"}, wantCode: 2, wantStderr: []string{"Port: 0"}},
		{name: "server bad cluster", args: []string{"server", "--cluster", "a:b"}, wantCode: 2, wantStderr: []string{"--cluster:", "contains ':'"}},
		{name: "server bad log level", args: []string{"server", "--log-level", "loud"}, wantCode: 2, wantStderr: []string{`--log-level: unknown level "loud"`}},
		{name: "server bad leaf remote", args: []string{"server", "--leaf-remote", "http://h:1"}, wantCode: 2, wantStderr: []string{"LeafRemotes", `scheme "http"`}},
		{name: "server extra argument", args: []string{"server", "now"}, wantCode: 2, wantStderr: []string{`unexpected argument "now"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.wantCode, stdout, stderr)
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, stdout)
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(stderr, w) {
					t.Errorf("stderr lacks %q:\n%s", w, stderr)
				}
			}
			if tt.wantCode == 0 && stderr != "" {
				t.Errorf("stderr not empty on success: %s", stderr)
			}
		})
	}
}

// TestEveryCommandHasHelp checks that -h and --help print each command's
// usage to stdout and exit 0, so a newly added command cannot forget it.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, c := range sortedCommands() {
		for _, h := range []string{"-h", "--help"} {
			t.Run(c.name+h, func(t *testing.T) {
				code, stdout, stderr := runCmd(t, c.name, h)
				if code != 0 || stderr != "" {
					t.Fatalf("exit %d, stderr %q", code, stderr)
				}
				if !strings.HasPrefix(stdout, "Usage: pmixbus "+c.name) {
					t.Fatalf("stdout does not start with the usage:\n%s", stdout)
				}
			})
		}
	}
}

func TestVersion(t *testing.T) {
	tests := []struct {
		name string
		set  string
		want string
	}{
		// Unset, it comes from the build info, "dev" for a plain build.
		{name: "unset", set: "", want: "pmixbus " + pmixbusVersion() + "\n"},
		{name: "ldflags", set: "v1.2.3", want: "pmixbus v1.2.3\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func(v string) { version = v }(version)
			version = tt.set
			code, stdout, _ := runCmd(t, "version")
			if code != 0 || !strings.HasPrefix(stdout, tt.want) || strings.HasPrefix(stdout, "pmixbus \n") {
				t.Fatalf("exit %d, stdout %q, want prefix %q", code, stdout, tt.want)
			}
		})
	}
}
