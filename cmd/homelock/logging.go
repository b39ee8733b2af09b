package main

import (
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// logFlags are the node's --log-format and --log-level.
type logFlags struct {
	format string
	level  string
	debug  bool
}

func (f *logFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.format, "log-format", "text", "log line format: text (key=value) or json (one object a line)")
	fs.StringVar(&f.level, "log-level", "info", "least severe level logged: debug, info, warn or error")
	fs.BoolVar(&f.debug, "v", false, "same as --log-level debug")
}

// logger is the handler the flags ask for, writing to w.
func (f *logFlags) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(f.level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", f.level)
	}
	if f.debug {
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	switch strings.ToLower(f.format) {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", f.format)
}
