//go:build !linux

package launch

import "os/exec"

// setParentDeathSignal does nothing here: there is no PR_SET_PDEATHSIG, and
// a process outlives a launcher that dies without cleaning up.
func setParentDeathSignal(*exec.Cmd) {}
