package main

import (
	"strings"
	"testing"
)

// TestBenchScale runs "pmixbus bench scale" small; its helper processes are
// this test binary (see TestMain).
func TestBenchScale(t *testing.T) {
	code, stdout, stderr := runCmd(t, "bench", "scale", "--clients", "10,20", "--register-rounds", "3", "--event-rounds", "1", "--burst", "2")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range []string{"20 clients (10 added", "agent process  heap", "\ntarget heap_per_client_kib_10 ", "\ntarget register_p50_20_vs_10 ", "\ntarget deliver_all_ms_20 "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
}

func TestBenchStalled(t *testing.T) {
	code, stdout, stderr := runCmd(t, "bench", "stalled", "--events", "100", "--windows", "2", "--rate", "2000", "--payload", "100", "--stalled", "1")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range []string{"with 1 stalled readers", "\ntarget stalled_p99_vs_alone "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
}

// TestBenchLaunch runs "pmixbus bench launch" small; its ranks are this
// test binary (see TestMain).
func TestBenchLaunch(t *testing.T) {
	t.Setenv("GORACE", "atexit_sleep_ms=0") // or each rank sleeps 1 s as it exits
	code, stdout, stderr := runCmd(t, "bench", "launch", "--sizes", "2", "--rounds", "1", "--kills", "1", "--node-downs", "1", "--interval", "250ms", "--ttl", "1s")
	if code != 0 {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	for _, w := range []string{"launch+wait", "\ntarget launch_2_vs_floor ", "\ntarget kill9_event_p50_ms ", "\ntarget nodedown_max_vs_ttl "} {
		if !strings.Contains(stdout, w) {
			t.Errorf("report lacks %q:\n%s", w, stdout)
		}
	}
}

func TestBenchUsageErrors(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "scale", "--clients", "10,5"}, "5 after 10: counts must increase"},
		{[]string{"bench", "scale", "--clients", "x"}, `"x": not a positive count`},
		{[]string{"bench", "scale", "--burst", "0"}, "--burst: 0; want at least 1"},
		{[]string{"bench", "stalled", "--stalled", "0"}, "--stalled: 0; want at least 1"},
		{[]string{"bench", "stalled", "--events", "5"}, "--events: 5; want at least 10"},
		{[]string{"bench", "launch", "--sizes", "16,2"}, "2 after 16: counts must increase"},
		{[]string{"bench", "launch", "--kills", "0"}, "--kills: 0; want at least 1"},
	} {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.args...)
			if code != exitUsage || !strings.Contains(stderr, tt.want) || stdout != "" {
				t.Errorf("exit %d, stderr %q, stdout %q; want %d and %q", code, stderr, stdout, exitUsage, tt.want)
			}
		})
	}
	code, stdout, _ := runCmd(t, "-h")
	if code != 0 || strings.Contains(stdout, "bench-scale-helper") {
		t.Errorf("the top-level usage lists the hidden helper:\n%s", stdout)
	}
	code, stdout, _ = runCmd(t, "bench", "-h")
	if code != 0 || !strings.Contains(stdout, "scale ") || !strings.Contains(stdout, "stalled ") {
		t.Errorf("bench usage lacks scale or stalled:\n%s", stdout)
	}
}
