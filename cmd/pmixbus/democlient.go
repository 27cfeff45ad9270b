package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
)

func init() {
	register(&command{
		name:    "demo-client",
		summary: "one client process of 'pmixbus demo'",
		hidden:  true,
		run:     runDemoClient,
	})
}

// demoLine is what a demo client reports on stdout, one JSON object per
// line.
type demoLine struct {
	Ev      string `json:"ev"` // "ready", "ran" (a handler ran) or "notified" (a command is done)
	Seq     int    `json:"seq,omitempty"`
	Code    int32  `json:"code,omitempty"`
	Handler string `json:"handler,omitempty"`
	Status  int32  `json:"status,omitempty"`
	Source  string `json:"source,omitempty"`
	Fence   int    `json:"fence,omitempty"`
	Err     string `json:"err,omitempty"`
}

// demoCommand is what the demo asks a client to do, one JSON object per
// line on its stdin: notify demo event Event, or fence Fence.
type demoCommand struct {
	Seq   int    `json:"seq"`
	Event string `json:"event,omitempty"`
	Fence int    `json:"fence,omitempty"`
}

// lineWriter writes demoLines, one at a time.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (lw *lineWriter) emit(l demoLine) {
	b, _ := json.Marshal(l)
	lw.mu.Lock()
	defer lw.mu.Unlock()
	fmt.Fprintf(lw.w, "%s\n", b)
}

func runDemoClient(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("demo-client", "", `
One client process of "pmixbus demo", which starts it the way a host RM
would: with the environment its agent issued (PMIX_NAMESPACE, PMIX_RANK,
PMIXBUS_AGENT, PMIXBUS_CREDENTIAL) and `+demoRoleEnv+` naming the handlers
to register. It prints "ready" once registered, runs the notify commands it
reads on stdin, reports every handler it runs on stdout (JSON lines), and
finalizes at the end of its input.`)
	if code, done := parseFlags(fs, args, stdout, stderr); done {
		return code
	}
	if code, done := noArgs(fs, stderr); done {
		return code
	}
	role := os.Getenv(demoRoleEnv)
	handlers, ok := roleHandlers(role)
	if !ok {
		return usageError(fs, stderr, "%s=%q: not a demo role", demoRoleEnv, role)
	}
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "pmixbus demo-client: "+format+"\n", a...)
		return exitFail
	}
	initCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := client.Init(initCtx)
	if err != nil {
		return fail("%v", err)
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Finalize(fctx)
	}()

	out := &lineWriter{w: stdout}
	for _, h := range handlers {
		if _, err := c.RegisterEventHandler(initCtx, h.codes, h.info(), demoHandlerFunc(h, out)); err != nil {
			return fail("registering %s: %v", h.name, err)
		}
	}
	out.emit(demoLine{Ev: "ready"})

	cmds := make(chan demoCommand)
	bad := make(chan error, 1)
	go func() {
		// Ends with the input, or with the process.
		defer close(cmds)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			var cmd demoCommand
			if err := json.Unmarshal(sc.Bytes(), &cmd); err != nil {
				bad <- fmt.Errorf("command %q: %v", sc.Text(), err)
				return
			}
			select {
			case cmds <- cmd:
			case <-ctx.Done():
				return
			}
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return exitOK
		case <-c.Lost():
			return fail("lost the agent")
		case err := <-bad:
			return fail("%v", err)
		case cmd, ok := <-cmds:
			if !ok {
				return exitOK
			}
			err := demoNotify(ctx, c, cmd)
			l := demoLine{Ev: "notified", Seq: cmd.Seq}
			if err != nil {
				l.Err = err.Error()
			}
			out.emit(l)
		}
	}
}

// demoHandlerFunc reports that h ran, then completes as h declares.
func demoHandlerFunc(h demoHandler, out *lineWriter) bus.Handler {
	return func(call *bus.Call, done bus.Done) {
		l := demoLine{Ev: "ran", Code: int32(call.Code), Handler: call.Name, Status: int32(h.status), Source: trace.Proc(call.Source)}
		if v, ok := pmix.LookupValue(call.Info, demoFenceKey); ok {
			n, _ := v.Int()
			l.Fence = int(n)
		}
		out.emit(l)
		done(h.status, h.results)
	}
}

func demoNotify(ctx context.Context, c *client.Client, cmd demoCommand) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cmd.Fence > 0 {
		return c.NotifyEvent(ctx, codeFence, pmix.RangeGlobal, fenceInfo(cmd.Fence))
	}
	ev, ok := demoEventByName(cmd.Event)
	if !ok {
		return fmt.Errorf("no demo event %q", cmd.Event)
	}
	return c.NotifyEvent(ctx, ev.code, ev.rng, ev.info)
}
