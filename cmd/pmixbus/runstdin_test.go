package main

import (
	"strings"
	"testing"
)

// TestRunStdinFlag: --stdin takes a rank, all or none; anything else is
// a usage error, before anything is launched.
func TestRunStdinFlag(t *testing.T) {
	code, _, errOut := runCmd(t, "run", "--nats", "nats://127.0.0.1:1", "--stdin", "first", "-n", "1", "/bin/true")
	if code != 2 || !strings.Contains(errOut, `--stdin "first": want a rank, all or none`) {
		t.Fatalf("exit %d:\n%s", code, errOut)
	}
}
