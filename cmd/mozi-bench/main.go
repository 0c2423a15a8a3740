// Command mozi-bench measures mozi against a private PostgreSQL: signed
// deliveries accepted per second through the webhook intake, tasks claimed
// and run per second through the dispatcher, and the latency from a
// webhook to its agent's process through a real mozi serve. It is built
// apart from mozi, so that the benchmarks and the fake Gitea they use do
// not ship in the production binary.
//
// Run `mozi-bench --help` for the benchmarks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/moziplus/mozi/cmd/internal/cli"
	"github.com/moziplus/mozi/cmd/internal/memory"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mozi-bench:", err)
		os.Exit(exitCode(err))
	}
}

// env is what every benchmark gets from the outside world.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	err := runBench(ctx, &env{getenv: getenv, stdout: stdout, stderr: stderr}, args)
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// command is a benchmark's usage line.
type command struct {
	name    string
	args    string // usage after the name
	summary string
}

// usagef is a wrong command line: mozi-bench exits with status 2.
func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

func exitCode(err error) int { return cli.ExitCode(err) }

// errHelp stops a benchmark after it printed its help.
var errHelp = cli.ErrHelp

// newFlagSet builds a benchmark's flag set; its usage names the benchmark.
func newFlagSet(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("mozi-bench "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		for _, c := range benchCommands {
			if c.name == name {
				fmt.Fprintf(w, "Usage: mozi-bench %s %s\n\n%s.\n", c.name, c.args, c.summary)
			}
		}
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses a benchmark's flags; --help prints its usage to
// stdout and stops it without an error (errHelp).
func parseFlags(e *env, fs *flag.FlagSet, args []string) error {
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return errHelp
		}
	}
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		return usagef("%v (%s --help lists its flags)", err, fs.Name())
	}
	if fs.NArg() > 0 {
		return usagef("%s takes no argument %q (%s --help lists its flags)", fs.Name(), fs.Arg(0), fs.Name())
	}
	return nil
}

// tuneGC sets the garbage collector as mozi serve does by default, so
// that what runs in process is measured as it runs there.
func tuneGC(e *env) { memory.Tune(e.getenv, 0) }
