package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/pmix"
)

// LaunchRankCommand is the hidden command of the launch benchmark's
// ranks: the caller's executable run with it (LaunchConfig.Rank) is the
// program each rank, and each process of the floor, runs.
const LaunchRankCommand = "bench-launch-rank"

// The modes of a rank, its one argument.
const (
	// rankTrivial (no argument): Init, Finalize, exit.
	rankTrivial = ""
	// rankPlain exits at once, without Init: the floor's process, which
	// has no agent to talk to.
	rankPlain = "plain"
	// rankWatch: Init; rank 0 registers a handler for every event and
	// prints each termination as an eventLine; every rank prints
	// readyLine, then waits until ctx ends (SIGTERM) and Finalizes.
	rankWatch = "watch"
	// rankWrite N writes N bytes of 100-byte lines to stdout as fast as
	// a program with a buffered stdout does, and exits (bench iof); no
	// Init: output needs none.
	rankWrite = "write"
	// rankLines N writes N lines, each holding the time it is written,
	// one every few milliseconds (bench iof's latency).
	rankLines = "lines"
)

// readyLine and eventLine are what a rank in rankWatch mode prints.
const (
	readyLine = "ready %d"
	eventLine = "event %d %s %d" // code, nspace.rank affected, Unix ns seen
)

// LaunchRank is a rank of the launch benchmark: the program run by
// "pmixbus bench-launch-rank [mode]". It reports on stdout; ctx ending
// (SIGTERM from the agent) ends a waiting rank normally.
func LaunchRank(ctx context.Context, mode string, stdout io.Writer) error {
	if mode == rankPlain {
		return nil
	}
	if f := strings.Fields(mode); len(f) == 2 && (f[0] == rankWrite || f[0] == rankLines) {
		n, err := strconv.Atoi(f[1])
		if err != nil || n < 0 {
			return fmt.Errorf("mode %q: want a count", mode)
		}
		if f[0] == rankWrite {
			return writeLines(stdout, n)
		}
		return timedLines(stdout, n)
	}
	if mode != rankTrivial && mode != rankWatch {
		return fmt.Errorf("unknown mode %q: want none, %s or %s", mode, rankPlain, rankWatch)
	}
	c, err := client.Init(ctx)
	if err != nil {
		return err
	}
	if mode == rankWatch {
		if err := watchTerminations(ctx, c, stdout); err != nil {
			_ = c.Finalize(context.WithoutCancel(ctx))
			return err
		}
		<-ctx.Done()
	}
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return c.Finalize(fctx)
}

// watchTerminations makes rank 0 print every event about a process the
// moment its handler runs, with the time: the benchmark compares it with
// when it sent the signal (same machine, same wall clock).
func watchTerminations(ctx context.Context, c *client.Client, stdout io.Writer) error {
	me := c.Proc()
	if me.Rank == 0 {
		_, err := c.RegisterEventHandler(ctx, nil, nil, func(call *bus.Call, done bus.Done) {
			at := time.Now().UnixNano()
			if v, ok := pmix.LookupValue(call.Info, pmix.KeyEventAffectedProc); ok {
				if p, ok := v.Proc(); ok {
					fmt.Fprintf(stdout, eventLine+"\n", call.Code, fmt.Sprintf("%s.%d", p.Nspace, p.Rank), at)
				}
			}
			done(pmix.EventNoActionTaken, nil)
		})
		if err != nil {
			return err
		}
	}
	_, err := fmt.Fprintf(stdout, readyLine+"\n", me.Rank)
	return err
}

// writeLines writes n bytes of 100-byte lines through a 64 KiB buffer.
func writeLines(stdout io.Writer, n int) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	line := []byte(strings.Repeat("x", 99) + "\n")
	for ; n >= len(line); n -= len(line) {
		if _, err := w.Write(line); err != nil {
			return err
		}
	}
	if _, err := w.Write(line[len(line)-n:]); err != nil {
		return err
	}
	return w.Flush()
}

// timedLines writes n lines "t <unix ns>", one every 5 ms, each in one
// write.
func timedLines(stdout io.Writer, n int) error {
	for range n {
		if _, err := fmt.Fprintf(stdout, "t %d\n", time.Now().UnixNano()); err != nil {
			return err
		}
		time.Sleep(5 * time.Millisecond)
	}
	return nil
}
