//go:build !linux

package clustertest

import "os/exec"

// dieWithTest: only Linux can have the kernel end a child with its parent.
func dieWithTest(cmd *exec.Cmd) *exec.Cmd { return cmd }
