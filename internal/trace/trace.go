package trace

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pmixbus/pmixbus/bus"
	"github.com/pmixbus/pmixbus/pmix"
)

// Status names the handler statuses briefly; other statuses keep their
// PMIx name.
func Status(s pmix.Status) string {
	switch s {
	case pmix.EventNoActionTaken:
		return "no-action"
	case pmix.EventPartialActionTaken:
		return "partial"
	case pmix.EventActionDeferred:
		return "deferred"
	case pmix.EventActionComplete:
		return "COMPLETE"
	}
	return s.String()
}

// Range is a range's name without its PMIX_RANGE_ prefix: "SESSION".
func Range(r pmix.Range) string { return strings.TrimPrefix(r.String(), "PMIX_RANGE_") }

// Code names an event code with its number, "PMIX_EVENT_NODE_DOWN(-231)",
// or "code -3001" for an application's own code.
func Code(s pmix.Status) string {
	n := s.String()
	if strings.HasPrefix(n, "PMIX_STATUS(") {
		return "code " + strconv.Itoa(int(s))
	}
	return n + "(" + strconv.Itoa(int(s)) + ")"
}

// Proc names a proc, or is empty for the zero proc (the host RM).
func Proc(p pmix.Proc) string {
	if p.IsZero() {
		return ""
	}
	return p.String()
}

// Origin names an event's source: "A/n1 job1.0", or "A/n1 RM".
func Origin(o bus.Origin) string {
	who := "RM"
	if !o.Proc.IsZero() {
		who = o.Proc.String()
	}
	return o.Cluster + "/" + o.Node + " " + who
}

// Handler names a handler that ran; an unnamed one by its id, "#3".
func Handler(x bus.Ran) string {
	if x.Name == "" {
		return fmt.Sprintf("#%d", x.ID)
	}
	return x.Name
}

// Chain shows a chain's outcome: "a:no-action > b:COMPLETE => completed,
// want-termination (required, by b)".
func Chain(o bus.Outcome) string {
	parts := make([]string, len(o.Ran))
	for i, x := range o.Ran {
		parts[i] = Handler(x) + ":" + Status(x.Status)
		if x.TimedOut {
			parts[i] += "(timed out)"
		}
	}
	s := strings.Join(parts, " > ")
	if len(parts) == 0 {
		s = "no handler ran"
	}
	var notes []string
	if o.Completed {
		notes = append(notes, "completed")
	}
	if o.Status != pmix.Success {
		notes = append(notes, o.Status.String())
	}
	if t := o.Termination; t.Decision != bus.Undecided {
		by := "by " + t.ByName
		if t.Required {
			by = "required, " + by
		}
		notes = append(notes, t.Decision.String()+" ("+by+")")
	}
	if len(notes) > 0 {
		s += " => " + strings.Join(notes, ", ")
	}
	return s
}
