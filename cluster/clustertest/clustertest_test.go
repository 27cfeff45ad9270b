package clustertest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records failures and cleanups instead of
// acting on them, to test the helpers' own failure paths.
type recorder struct {
	testing.TB
	cleanups []func()
	failure  string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Cleanup(f func())               { r.cleanups = append(r.cleanups, f) }
func (r *recorder) Errorf(format string, a ...any) { r.failure = fmt.Sprintf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) { r.failure = fmt.Sprintf(format, a...) }
func (r *recorder) runCleanups() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

func TestWaitFor(t *testing.T) {
	errNotYet := errors.New("not yet")
	tests := []struct {
		name        string
		succeedOn   int // call that returns nil; 0 = never
		timeout     time.Duration
		wantFailure string
	}{
		{name: "at once", succeedOn: 1, timeout: time.Second},
		{name: "after retries", succeedOn: 3, timeout: 5 * time.Second},
		{name: "never", timeout: 100 * time.Millisecond, wantFailure: "not true after 100ms: not yet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			calls := 0
			WaitFor(r, tt.timeout, func() error {
				calls++
				if calls == tt.succeedOn {
					return nil
				}
				return errNotYet
			})
			if r.failure != tt.wantFailure {
				t.Fatalf("failure %q, want %q", r.failure, tt.wantFailure)
			}
			if tt.succeedOn != 0 && calls != tt.succeedOn {
				t.Fatalf("%d calls, want %d", calls, tt.succeedOn)
			}
		})
	}
}

func TestCheckGoroutines(t *testing.T) {
	defer func(d time.Duration) { LeakTimeout = d }(LeakTimeout)
	LeakTimeout = 200 * time.Millisecond

	tests := []struct {
		name     string
		leak     bool
		wantFail bool
	}{
		{name: "goroutine ends", leak: false},
		{name: "goroutine leaks", leak: true, wantFail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recorder{TB: t}
			CheckGoroutines(r)
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() {
				defer close(done)
				<-stop
			}()
			if !tt.leak {
				close(stop)
				<-done
			}
			r.runCleanups()
			if tt.leak {
				close(stop)
			}
			if got := r.failure != ""; got != tt.wantFail {
				t.Fatalf("failure %q, want failure: %v", r.failure, tt.wantFail)
			}
			if tt.wantFail && !strings.Contains(r.failure, "TestCheckGoroutines") {
				t.Fatalf("failure does not show the leaked goroutine's stack:\n%s", r.failure)
			}
		})
	}
}

func TestLogLevel(t *testing.T) {
	for _, tt := range []struct {
		in string
		ok bool
	}{{"", false}, {"off", false}, {"WARN", true}, {"trace", true}, {"debug", true}} {
		if _, ok := logLevel(tt.in); ok != tt.ok {
			t.Errorf("logLevel(%q) ok = %v", tt.in, ok)
		}
	}
}
