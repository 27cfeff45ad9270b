package dvm

import (
	"slices"
	"testing"
)

func TestTasksPerNode(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []int
		ok   bool
	}{
		{"2(x3),1", []int{2, 2, 2, 1}, true},
		{"4", []int{4}, true},
		{"1(x2)", []int{1, 1}, true},
		{"", nil, false},
		{"2(x", nil, false},
		{"2(y3)", nil, false},
		{"a", nil, false},
		{"1(x0)", nil, false},
		{"-1", nil, false},
		{"1(x99999999)", nil, false},
	} {
		got, ok := tasksPerNode(c.in)
		if ok != c.ok || !slices.Equal(got, c.want) {
			t.Errorf("tasksPerNode(%q) = %v, %v; want %v, %v", c.in, got, ok, c.want, c.ok)
		}
	}
}

// TestSlurmAllocationOutside: outside an allocation there are no nodes
// and no error.
func TestSlurmAllocationOutside(t *testing.T) {
	t.Setenv("SLURM_JOB_ID", "")
	nodes, err := SlurmAllocation(t.Context())
	if nodes != nil || err != nil {
		t.Fatalf("outside an allocation: %v, %v", nodes, err)
	}
}
