package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/pmixbus/pmixbus/launch"
)

// How pmixbus run waits for its job: every wait is bounded (docs/launch.md,
// "When something is lost").
const (
	// lostAfter is how long run's connection to NATS may stay down before
	// it gives up on the job: the job TTL, after which the agents that
	// still reach NATS have seen the job's key expire and end its ranks a
	// launcher grace later.
	lostAfter = launch.DefaultJobTTL
	// hardStopWait is how long run waits for the ranks' ends once told to
	// stop hard (a second SIGINT, SIGTERM) before it exits anyway.
	hardStopWait = 3 * time.Second
	// connCheck is how often run looks at its connection.
	connCheck = 250 * time.Millisecond
)

// jobWatch is what waitRun watches besides the run.
type jobWatch struct {
	nc         *nats.Conn
	agents     []localEndpoint // the local agents whose NATS server nc is on
	timeout    time.Duration   // --timeout; 0: none
	continuous bool
}

// waitRun waits until r has ended, or run must stop, and returns the exit
// code. The first SIGINT (ctx ending) ends the job gracefully; a second,
// or a SIGTERM, kills it and exits within hardStopWait whatever answers.
// A connection to NATS down for lostAfter ends the wait too.
func waitRun(ctx context.Context, r *launch.Run, w jobWatch, stderr io.Writer) int {
	var expire <-chan time.Time
	if w.timeout > 0 {
		t := time.NewTimer(w.timeout)
		defer t.Stop()
		expire = t.C
	}
	check := time.NewTicker(connCheck)
	defer check.Stop()
	var (
		sigs     chan os.Signal
		hardStop <-chan time.Time
		stopCode int       // the exit code of a hard stop
		downAt   time.Time // when the connection was first seen down
		timedOut bool
	)
	done := ctx.Done()
	stopHard := func(code int, why string) {
		if hardStop != nil {
			return
		}
		fmt.Fprintf(stderr, "pmixbus run: %s: killing the job; exiting within %v\n", why, hardStopWait)
		stopCode = code
		hardStop = time.After(hardStopWait)
		go r.Terminate(true)
	}
	for {
		select {
		case <-r.Done():
			res, _ := r.Wait(context.Background())
			return runResult(res, timedOut, w.continuous, stopCode, stderr)
		case <-expire:
			timedOut = true
			fmt.Fprintf(stderr, "pmixbus run: the job ran out of time (--timeout %v); ending it\n", w.timeout)
			go r.Terminate(false)
		case <-done:
			done = nil
			sigs = make(chan os.Signal, 1)
			signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
			defer signal.Stop(sigs)
			if signalOf(ctx) == syscall.SIGTERM {
				stopHard(exitTerminated, "terminated")
				continue
			}
			fmt.Fprintln(stderr, "pmixbus run: interrupted: ending the job (interrupt again to kill it and exit)")
			go r.Terminate(false)
		case s := <-sigs:
			code := exitInterrupted
			if s == syscall.SIGTERM {
				code = exitTerminated
			}
			stopHard(code, s.String()+" again")
		case <-hardStop:
			fmt.Fprintf(stderr, "pmixbus run: exiting without knowing how every rank ended: %s\n", unreachedNote)
			return stopCode
		case now := <-check.C:
			if w.nc.IsConnected() {
				downAt = time.Time{}
				continue
			}
			if downAt.IsZero() {
				downAt = now
				continue
			}
			if now.Sub(downAt) >= lostAfter {
				return lostNATS(w, now.Sub(downAt), stderr)
			}
		}
	}
}

// unreachedNote says what becomes of ranks run can no longer reach.
const unreachedNote = "the agents end a job's ranks once its launcher has stopped refreshing its key for the job TTL and their launcher grace (docs/launch.md)"

// lostNATS reports a connection to NATS that stayed down and returns the
// exit code: exitAgentLost when the local agent whose embedded server it
// was is gone (its ranks died with it), else exitNATSLost.
func lostNATS(w jobWatch, down time.Duration, stderr io.Writer) int {
	url := w.nc.ConnectedUrlRedacted()
	if url == "" {
		url = "its NATS server"
	}
	for _, a := range w.agents {
		if !processAlive(a.Pid) {
			fmt.Fprintf(stderr, "pmixbus run: lost the job: the %s, whose NATS server this run used, is gone (its ranks went with it); %s\n", a, unreachedNote)
			return exitAgentLost
		}
	}
	fmt.Fprintf(stderr, "pmixbus run: lost the job: no connection to the NATS server %s for %v; how its ranks end is not known here: %s\n", url, down.Round(100*time.Millisecond), unreachedNote)
	return exitNATSLost
}

// runResult reports how the run ended and returns the exit code: the
// job's, or stopCode after a hard stop, exitTimeout after --timeout,
// exitNodeLost when the first failure was a node going down.
func runResult(res launch.Result, timedOut, continuous bool, stopCode int, stderr io.Writer) int {
	if e := res.First; e != nil {
		fmt.Fprintf(stderr, "pmixbus run: rank %d of %s on node %s %s (%v)", e.Rank, e.Nspace, e.Node, e.Text, e.State)
		if !res.Canceled && !continuous {
			fmt.Fprint(stderr, "; the other ranks were ended")
		}
		fmt.Fprintln(stderr)
	}
	switch {
	case stopCode != 0:
		return stopCode
	case timedOut:
		return exitTimeout
	case res.First == nil && res.Canceled:
		return exitInterrupted
	case res.Lost:
		return exitNATSLost
	case res.NodeLost:
		return exitNodeLost
	}
	return res.ExitCode
}
