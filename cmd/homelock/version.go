package main

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/homelock/homelock"
)

func runVersion(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, "Usage: homelock version\n\nPrints the module version of this build and the lock protocol version it speaks\n(members of one epoch must all speak the same one).\n")
	}
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "homelock version: unexpected arguments %q\n", fs.Args())
		return exitUsage
	}
	fmt.Fprintf(stdout, "homelock %s (lock protocol v%d, %s)\n", moduleVersion(), homelock.ProtocolVersion, goVersion())
	return 0
}

// moduleVersion is the version of the module this binary was built from:
// the tag for `go install ...@v1.2.3`, "(devel)" for a build in a checkout
// (with its VCS revision, when the build recorded one).
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "-dirty"
			}
		}
	}
	if rev != "" && v == "(devel)" {
		v += " " + rev[:min(len(rev), 12)] + dirty
	}
	return v
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown go"
}
