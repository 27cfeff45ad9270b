package dvm

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/pmixbus/pmixbus/launch"
	"github.com/pmixbus/pmixbus/pmix"
)

// ErrAllocation: the Slurm allocation the process runs in could not be
// read.
var ErrAllocation = pmix.NewCodedError(pmix.ErrBadParam, "dvm.allocation", "the Slurm allocation could not be read")

// SlurmAllocation returns the nodes of the Slurm allocation this process
// runs in, as prterun takes them when given no hosts: SLURM_JOB_NODELIST
// expanded by `scontrol show hostnames`, each with the tasks
// SLURM_TASKS_PER_NODE gives it as its slots (0, its agent's count, when
// that variable is absent or does not match the nodes). Outside an
// allocation (no SLURM_JOB_ID or no node list) it returns nil, nil.
//
// Errors: ErrAllocation when scontrol fails or lists no node.
func SlurmAllocation(ctx context.Context) ([]launch.Node, error) {
	list := os.Getenv("SLURM_JOB_NODELIST")
	if list == "" {
		list = os.Getenv("SLURM_NODELIST") // before Slurm 20.02's rename, still set
	}
	if os.Getenv("SLURM_JOB_ID") == "" || list == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "scontrol", "show", "hostnames", list).Output()
	if err != nil {
		if ee := (*exec.ExitError)(nil); errors.As(err, &ee) && len(ee.Stderr) > 0 {
			err = fmt.Errorf("%v: %s", err, strings.TrimSpace(string(ee.Stderr)))
		}
		return nil, fmt.Errorf("%w: scontrol show hostnames %s: %v", ErrAllocation, list, err)
	}
	names := strings.Fields(string(out))
	if len(names) == 0 {
		return nil, fmt.Errorf("%w: scontrol show hostnames %s listed no node", ErrAllocation, list)
	}
	slots, ok := tasksPerNode(os.Getenv("SLURM_TASKS_PER_NODE"))
	if !ok || len(slots) != len(names) {
		slots = make([]int, len(names))
	}
	nodes := make([]launch.Node, len(names))
	for i, n := range names {
		nodes[i] = launch.Node{Name: n, Slots: slots[i]}
	}
	return nodes, nil
}

// tasksPerNode expands Slurm's SLURM_TASKS_PER_NODE ("2(x3),1": three
// nodes of 2, then one of 1), reporting whether it parsed.
func tasksPerNode(s string) ([]int, bool) {
	if s == "" {
		return nil, false
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		count, times := part, "1"
		if i := strings.IndexByte(part, '('); i >= 0 {
			if !strings.HasPrefix(part[i:], "(x") || !strings.HasSuffix(part, ")") {
				return nil, false
			}
			count, times = part[:i], part[i+2:len(part)-1]
		}
		n, err1 := strconv.Atoi(count)
		k, err2 := strconv.Atoi(times)
		if err1 != nil || err2 != nil || n < 0 || k < 1 || len(out)+k > 1<<16 {
			return nil, false
		}
		for range k {
			out = append(out, n)
		}
	}
	return out, true
}
