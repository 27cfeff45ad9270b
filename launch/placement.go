package launch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/pmixbus/pmixbus/pmix"
)

// Node is a node ranks can be placed on: its name, its slots, and how many
// of them are in use.
type Node struct {
	Name  string
	Slots int
	Used  int
}

// Mapping policies (pmixbus run --map-by).
const (
	MapBySlot = "slot" // fill each node's free slots before the next node's
	MapByNode = "node" // one rank per node in turn
)

// Place maps n ranks onto nodes, in the order given, by policy. With
// oversubscribe, ranks beyond the free slots go round the nodes again;
// without, they are an error that says what is free.
//
// Errors: ErrPlacement.
func Place(n int, nodes []Node, policy string, oversubscribe bool) ([]Placement, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: %d ranks", ErrPlacement, n)
	}
	if len(nodes) == 0 {
		return nil, fmt.Errorf("%w: no live agent to place ranks on", ErrPlacement)
	}
	free := make([]int, len(nodes))
	total := 0
	for i, nd := range nodes {
		free[i] = max(nd.Slots-nd.Used, 0)
		total += free[i]
	}
	if total < n && !oversubscribe {
		var parts []string
		for _, nd := range nodes {
			parts = append(parts, fmt.Sprintf("%s %d of %d free", nd.Name, max(nd.Slots-nd.Used, 0), nd.Slots))
		}
		return nil, fmt.Errorf("%w: %d ranks, %d free slots (%s); use --oversubscribe or fewer ranks", ErrPlacement, n, total, strings.Join(parts, ", "))
	}
	out := make([]Placement, 0, n)
	place := func(i int) {
		out = append(out, Placement{Rank: pmix.Rank(len(out)), Node: nodes[i].Name})
	}
	switch policy {
	case MapBySlot, "":
		for i := range nodes {
			for k := 0; k < free[i] && len(out) < n; k++ {
				place(i)
			}
		}
	case MapByNode:
		for placed := true; placed && len(out) < n; {
			placed = false
			for i := range nodes {
				if free[i] > 0 && len(out) < n {
					free[i]--
					place(i)
					placed = true
				}
			}
		}
	default:
		return nil, fmt.Errorf("%w: map-by %s: want %s or %s", ErrPlacement, pmix.Quote(policy), MapBySlot, MapByNode)
	}
	for i := 0; len(out) < n; i = (i + 1) % len(nodes) {
		place(i) // oversubscribed
	}
	return out, nil
}

// ParseHosts parses --host: "node[:slots],…", slots 1 when not given.
//
// Errors: ErrPlacement for an empty name, bad slots or a repeated node.
func ParseHosts(s string) ([]Node, error) {
	var out []Node
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		name, slots, hasSlots := strings.Cut(strings.TrimSpace(part), ":")
		n := 1
		if hasSlots {
			var err error
			if n, err = strconv.Atoi(slots); err != nil || n < 1 {
				return nil, fmt.Errorf("%w: host %s: slots must be a positive number", ErrPlacement, pmix.Quote(part))
			}
		}
		if name == "" {
			return nil, fmt.Errorf("%w: --host %s has an empty node name", ErrPlacement, pmix.Quote(s))
		}
		if seen[name] {
			return nil, fmt.Errorf("%w: host %s given twice", ErrPlacement, pmix.Quote(name))
		}
		seen[name] = true
		out = append(out, Node{Name: name, Slots: n})
	}
	return out, nil
}
