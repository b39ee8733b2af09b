//go:build !linux

package main

import "os/exec"

// dieWithUs does nothing where the kernel cannot signal a child on its
// parent's death: a SIGKILL to `homelock lock` leaves its command running
// there.
func dieWithUs(*exec.Cmd) {}
