//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing here: a demo client whose demo died
// without cleaning up exits at the end of its input, or when it loses its
// agent.
func setParentDeathSignal(*exec.Cmd) {}
