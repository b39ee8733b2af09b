// Command homelock runs homelock nodes and tools: sim (seeded simulation of
// the protocol) and harness (the measurement gate, not built yet).
package main

import (
	"fmt"
	"io"
	"os"
)

const usage = `homelock: cluster-wide locks with fencing tokens.

Usage:
  homelock sim [--seeds N | --seed S] [--nodes K] [--trace] [--json]
  homelock harness ...   (the measurement gate; not built yet, see README)

Run "homelock <command> --help" for a command's flags.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "sim":
		return runSim(args[1:], stdout, stderr)
	case "harness":
		fmt.Fprintln(stderr, "homelock harness: not built yet: it needs the node wiring (gRPC, Pebble, memberlist), which is in progress; run `homelock sim` for the protocol simulation")
		return 2
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "homelock: unknown command %q\n\n%s", args[0], usage)
	return 2
}
