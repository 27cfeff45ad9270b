package demo

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/client"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
)

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

// IsRole reports whether role names a demo client's handlers.
func IsRole(role string) bool {
	_, ok := demoRoles[role]
	return ok
}

// RunClient is one client process of the demo, which starts it the way a
// host RM would: with the environment its agent issued (PMIX_NAMESPACE,
// PMIX_RANK, PMIXBUS_AGENT, PMIXBUS_CREDENTIAL) and RoleEnv naming role.
// It attaches, registers role's handlers, reports "ready", runs the notify
// commands it reads from in, reports every handler it runs on out (JSON
// lines), and finalizes at the end of in or when ctx ends. The goroutine
// reading in ends with it.
//
// Errors: for an unknown role; client.Init's; a registration's; a command
// it cannot read; the loss of its agent.
func RunClient(ctx context.Context, role string, in io.Reader, out io.Writer) error {
	handlers, ok := roleHandlers(role)
	if !ok {
		return fmt.Errorf("%q: not a demo role", role)
	}
	initCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	c, err := client.Init(initCtx)
	if err != nil {
		return err
	}
	defer func() {
		fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.Finalize(fctx)
	}()

	lines := &lineWriter{w: out}
	for _, h := range handlers {
		if _, err := c.RegisterEventHandler(initCtx, h.codes, h.info(), demoHandlerFunc(h, lines)); err != nil {
			return fmt.Errorf("registering %s: %w", h.name, err)
		}
	}
	lines.emit(demoLine{Ev: "ready"})

	cmds := make(chan demoCommand)
	bad := make(chan error, 1)
	go func() {
		// Ends with the input, or with the process.
		defer close(cmds)
		sc := bufio.NewScanner(in)
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
			return nil
		case <-c.Lost():
			return errors.New("lost the agent")
		case err := <-bad:
			return err
		case cmd, ok := <-cmds:
			if !ok {
				return nil
			}
			err := demoNotify(ctx, c, cmd)
			l := demoLine{Ev: "notified", Seq: cmd.Seq}
			if err != nil {
				l.Err = err.Error()
			}
			lines.emit(l)
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
