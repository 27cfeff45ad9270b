package clustertest

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// LeakTimeout is how long CheckGoroutines waits for goroutines to end.
var LeakTimeout = 10 * time.Second

// CheckGoroutines records the goroutines running now and registers a cleanup
// that fails t if, LeakTimeout after the test's other cleanups, goroutines
// started since are still running; the failure lists their stacks.
//
// Call it first in the test, so that its cleanup runs after the cleanups
// that shut servers and connections down. It counts every goroutine of the
// process: do not use it in a test that runs in parallel with others.
func CheckGoroutines(t testing.TB) {
	t.Helper()
	before := goroutineIDs()
	t.Cleanup(func() {
		t.Helper()
		var leaked []string
		err := waitFor(LeakTimeout, func() error {
			leaked = leaked[:0]
			for id, stack := range goroutines() {
				if !before[id] && !outlives(stack) {
					leaked = append(leaked, stack)
				}
			}
			if len(leaked) > 0 {
				return fmt.Errorf("%d goroutines leaked", len(leaked))
			}
			return nil
		})
		if err != nil {
			t.Errorf("%v:\n\n%s", err, strings.Join(leaked, "\n\n"))
		}
	})
}

// outlivesServer are functions of nats-server whose goroutines may outlive
// the server that started them by a bounded time, holding nothing of the
// caller's: the answer to a stream source's consumer creation, waited for
// 30 s (srcConsumerWaitTime) whether the server shut down or not, when the
// other domain went first (GLOBAL events sourced between clusters).
var outlivesServer = []string{"server.(*stream).trySetupSourceConsumer"}

// outlives reports whether stack is a goroutine of outlivesServer.
func outlives(stack string) bool {
	for _, f := range outlivesServer {
		if strings.Contains(stack, f) {
			return true
		}
	}
	return false
}

func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for id := range goroutines() {
		ids[id] = true
	}
	return ids
}

// goroutines returns the stack of every goroutine but the caller's, keyed by
// goroutine id.
func goroutines() map[string]string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	stacks := map[string]string{}
	for i, g := range bytes.Split(buf, []byte("\n\n")) {
		if i == 0 {
			continue // the calling goroutine
		}
		header, _, _ := bytes.Cut(g, []byte(" ["))
		stacks[string(bytes.TrimPrefix(header, []byte("goroutine ")))] = string(g)
	}
	return stacks
}
