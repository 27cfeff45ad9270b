package demo

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/internal/trace"
	"github.com/pmixbus/pmixbus/pmix"
)

// oracle holds, for each client, an in-process registry with the client's
// declared registrations: the chains it runs are what the demo expects.
type oracle struct {
	regs map[string]*bus.Registry // by client key
}

func newOracle() (*oracle, error) {
	o := &oracle{regs: map[string]*bus.Registry{}}
	for _, c := range demoClients {
		reg, err := bus.NewRegistry(bus.Config{Self: c.origin()})
		if err != nil {
			o.close()
			return nil, err
		}
		o.regs[c.key()] = reg
		hs, ok := roleHandlers(c.role)
		if !ok {
			o.close()
			return nil, fmt.Errorf("client %s: unknown role %q", c.key(), c.role)
		}
		for _, h := range hs {
			if _, err := reg.Register(h.codes, h.info(), func(_ *bus.Call, done bus.Done) { done(h.status, h.results) }); err != nil {
				o.close()
				return nil, fmt.Errorf("client %s: handler %s: %w", c.key(), h.name, err)
			}
		}
	}
	return o, nil
}

func (o *oracle) close() {
	for _, r := range o.regs {
		r.Close()
	}
}

// expectedChain is one chain the demo expects an event to run.
type expectedChain struct {
	client  demoClient
	outcome bus.Outcome
}

// expect returns the chains ev must run, in demoClients order, and the
// clients it reaches where no handler takes it.
func (o *oracle) expect(ctx context.Context, ev demoEvent) (chains []expectedChain, untaken []demoClient, err error) {
	for _, c := range demoClients {
		if !ev.reaches(c) {
			continue
		}
		reg := o.regs[c.key()]
		be := ev.busEvent(c)
		if !reg.Wants(be) {
			untaken = append(untaken, c)
			continue
		}
		oc, err := reg.Run(ctx, be)
		if err != nil {
			return nil, nil, err
		}
		chains = append(chains, expectedChain{client: c, outcome: oc})
	}
	return chains, untaken, nil
}

// codesString names a registration's codes: "PMIX_EVENT_NODE_DOWN(-231)",
// "codes -3001, -3002".
func codesString(codes []pmix.Status) string {
	if len(codes) == 1 {
		return trace.Code(codes[0])
	}
	names := make([]string, len(codes))
	app := true
	for i, c := range codes {
		names[i] = trace.Code(c)
		if n, ok := strings.CutPrefix(names[i], "code "); ok {
			names[i] = n
		} else {
			app = false
		}
	}
	if app {
		return "codes " + strings.Join(names, ", ")
	}
	return strings.Join(names, ", ")
}

// describeRegistration says what handler h's registration g asked for, for
// the demo's header: "default, LAST", "PMIX_EVENT_PROC_TERMINATED(-201),
// AFTER checkpoint", "default, source range RM".
func describeRegistration(g bus.Registration, h demoHandler) string {
	var parts []string
	if g.Category == bus.CategoryDefault {
		parts = append(parts, "default")
	} else {
		parts = append(parts, codesString(g.Codes))
	}
	switch g.Placement {
	case bus.PlacePrepend:
		if pmix.Flag(h.attrs, pmix.KeyEventHdlrPrepend) {
			parts = append(parts, "PREPEND")
		}
	case bus.PlaceBefore, bus.PlaceAfter:
		parts = append(parts, strings.ToUpper(g.Placement.String())+" "+g.Target)
	default:
		parts = append(parts, strings.ToUpper(g.Placement.String()))
	}
	if g.SourceRange != pmix.RangeUndef {
		parts = append(parts, "source range "+trace.Range(g.SourceRange))
	}
	switch {
	case g.EnviroLevel && !g.JobLevel:
		parts = append(parts, "environment events only")
	case g.JobLevel && !g.EnviroLevel:
		parts = append(parts, "job events only")
	}
	return strings.Join(parts, ", ")
}
