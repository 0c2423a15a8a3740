package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "version")
	if err := parseFlags(e, fs, args); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "mozi %s (%s, %s/%s", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				fmt.Fprintf(e.stdout, ", commit %s", s.Value[:12])
			}
		}
	}
	fmt.Fprintln(e.stdout, ")")
	return nil
}
