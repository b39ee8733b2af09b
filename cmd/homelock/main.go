package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `homelock: cluster-wide locks with fencing tokens.

Usage:
  homelock node --id ID --data-dir DIR [--bootstrap --initial IDS | --join ADDRS] [flags]
  homelock lock [--node ADDR[,ADDR...]] [--lease D] [--wait D] [--try] NAME -- COMMAND [ARGS...]
  homelock status [--node ADDR[,ADDR...]] [--json]
  homelock sim [--seeds N | --seed S] [--nodes K] [--trace] [--json]
  homelock harness [--duration D] [--out DIR] ...   (the measurement gate: a local 3-node cluster)
  homelock soak [--duration D] [--seed S] ...       (a long run of a local cluster under kills and restarts)
  homelock version

Run "homelock <command> --help" for a command's flags.

`

func main() {
	if len(os.Args) > 1 && os.Args[1] == "lock" {
		// A process of its own (supervise_linux.go); run, which tests call
		// in their own process, runs the lock command unsupervised.
		os.Exit(runLockProcess(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage+exitCodesHelp)
		return exitUsage
	}
	switch args[0] {
	case "node":
		return runNode(args[1:], stdout, stderr)
	case "lock":
		return runLock(args[1:], stdout, stderr)
	case "status":
		return runStatus(args[1:], stdout, stderr)
	case "sim":
		return runSim(args[1:], stdout, stderr)
	case "harness":
		return runHarness(args[1:], stdout, stderr)
	case "soak":
		return runSoak(args[1:], stdout, stderr)
	case "version", "--version", "-version":
		return runVersion(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage+exitCodesHelp)
		return 0
	}
	fmt.Fprintf(stderr, "homelock: unknown command %q\n\n%s", args[0], usage)
	return exitUsage
}
