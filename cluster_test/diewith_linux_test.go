package clustertest

import (
	"os/exec"
	"syscall"
)

// dieWithTest has the kernel SIGKILL cmd when the test process dies, even
// by a signal nothing can catch (a `go test` timeout, a CI runner's kill):
// the node and lock processes a test starts must not outlive it. (The
// signal follows the OS thread that started cmd; Go's runtime does not end
// its threads while the program runs, as nothing here locks one.)
func dieWithTest(cmd *exec.Cmd) *exec.Cmd {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
	return cmd
}
