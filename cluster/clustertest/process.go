package clustertest

import (
	"fmt"
	"os"
	"strings"
)

// ProcessRuns reports whether process pid runs: it exists and is not a
// zombie (one nobody reaps, in a container whose first process does not).
// Linux only (/proc); false elsewhere.
func ProcessRuns(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, _ := strings.Cut(string(stat), ") ")
	return !strings.HasPrefix(rest, "Z") && !strings.HasPrefix(rest, "X")
}
