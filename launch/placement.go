package launch

import (
	"bufio"
	"fmt"
	"io"
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

// ParseMapBy parses mpirun's --map-by (PMIx's PMIX_MAPBY): a policy and
// optional ":modifier,…". Open MPI's hardware policies map as slot does
// (fill a node, then the next): pmixbus binds no rank, so they only
// differ there. over is set when a modifier asks for oversubscription or
// forbids it.
//
// Errors: pmix.ErrBadParam for a policy or modifier pmixbus does not map by.
func ParseMapBy(s string) (policy string, over *bool, err error) {
	name, mods, _ := strings.Cut(s, ":")
	switch strings.ToLower(name) {
	case "slot", "core", "socket", "numa", "hwthread", "board", "package", "l1cache", "l2cache", "l3cache":
		policy = MapBySlot
	case "node":
		policy = MapByNode
	default:
		return "", nil, pmix.Errorf(pmix.ErrBadParam, "map-by %s: unknown policy; want slot or node (or Open MPI's core, socket, numa…, which map as slot)", name)
	}
	for _, m := range strings.Split(mods, ",") {
		switch strings.ToUpper(strings.TrimSpace(m)) {
		case "":
		case "OVERSUBSCRIBE":
			over = new(true)
		case "NOOVERSUBSCRIBE":
			over = new(false)
		default:
			return "", nil, pmix.Errorf(pmix.ErrBadParam, "map-by %s: modifier %s is not supported; want OVERSUBSCRIBE or NOOVERSUBSCRIBE", s, m)
		}
	}
	return policy, over, nil
}

// ParseHosts parses --host (mpirun's -H): "node[:slots],…", slots 1 when
// not given; a node named again adds its slots ("a,a,b" is a:2,b:1, as
// mpirun counts it).
//
// Errors: ErrPlacement for an empty name or bad slots.
func ParseHosts(s string) ([]Node, error) {
	var out []Node
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
		out = addHost(out, Node{Name: name, Slots: n})
	}
	return out, nil
}

// addHost adds n to nodes, adding its slots to an entry of the same name.
func addHost(nodes []Node, n Node) []Node {
	for i := range nodes {
		if nodes[i].Name == n.Name {
			if nodes[i].Slots > 0 && n.Slots > 0 {
				nodes[i].Slots += n.Slots
			}
			return nodes
		}
	}
	return append(nodes, n)
}

// ParseHostfile parses a hostfile as Open MPI's and PRRTE's: one node per
// line, "name [slots=N] [max_slots=M]" ("cpu=N" and "count=N" are slots
// too), '#' starting a comment. A node without slots gets Slots 0: as many
// as its agent offers. A name given again adds its slots. max_slots is
// accepted and ignored (an agent's slots are its limit).
//
// Errors: ErrPlacement naming the line for a bad entry or an empty file.
func ParseHostfile(r io.Reader) ([]Node, error) {
	var out []Node
	sc := bufio.NewScanner(r)
	for line := 1; sc.Scan(); line++ {
		text, _, _ := strings.Cut(sc.Text(), "#")
		fields := strings.Fields(text)
		if len(fields) == 0 {
			continue
		}
		n := Node{Name: fields[0]}
		if strings.ContainsAny(n.Name, "=:,") {
			return nil, fmt.Errorf("%w: hostfile line %d: %s is not a host name", ErrPlacement, line, pmix.Quote(n.Name))
		}
		for _, f := range fields[1:] {
			k, v, ok := strings.Cut(f, "=")
			switch k = strings.ToLower(k); {
			case !ok:
				return nil, fmt.Errorf("%w: hostfile line %d: %s is not key=value (slots=N)", ErrPlacement, line, pmix.Quote(f))
			case k == "slots" || k == "cpu" || k == "count":
				slots, err := strconv.Atoi(v)
				if err != nil || slots < 1 {
					return nil, fmt.Errorf("%w: hostfile line %d: %s: slots must be a positive number", ErrPlacement, line, pmix.Quote(f))
				}
				n.Slots = slots
			case k == "max_slots" || k == "max-slots":
			default:
				return nil, fmt.Errorf("%w: hostfile line %d: unknown key %s; want slots= or max_slots=", ErrPlacement, line, pmix.Quote(k))
			}
		}
		out = addHost(out, n)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: hostfile: %v", ErrPlacement, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: the hostfile names no host", ErrPlacement)
	}
	return out, nil
}
