package main

import (
	"os/exec"
	"syscall"
)

// dieWithUs has the kernel SIGKILL cmd when this process dies, even by a
// SIGKILL that nothing can catch: its Lock stream then ends and the lock
// is released, so cmd must not go on without it. (The signal follows the
// death of the OS thread that started cmd; Go's runtime does not end its
// threads while the program runs, as nothing here locks one.)
func dieWithUs(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
