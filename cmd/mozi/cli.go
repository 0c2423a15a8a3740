package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/moziplus/mozi/cmd/internal/cli"
)

// env is what every subcommand gets from the outside world.
type env struct {
	getenv func(string) string
	stdout io.Writer
	stderr io.Writer
}

type command struct {
	name    string
	args    string // usage after the name
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

// commands lists every subcommand in the order --help shows them.
func commands() []command {
	return []command{
		{"serve", "[--config FILE] [--data-dir DIR]", "run mozi: webhook intake, dispatcher, ticker, metrics", runServe},
		{"migrate", "up|down|status [--config FILE] [--data-dir DIR]", "apply, roll back or list database migrations", runMigrate},
		{"tasks", "[--status S] [--repo R] [--agent X] [--json] | --stats [--days N]", "list tasks, newest first; --stats: outcomes of merged agent pull requests", runTasks},
		{"task", "show|retry|resume|cancel ID | create --repo R --issue N --action A --agent X", "inspect, retry, resume, cancel or create one task", runTask},
		{"deliveries", "[--failed] [--json] | requeue ID…", "list webhook deliveries in the inbox, or requeue parked ones", runDeliveries},
		{"replay", "[--url URL] [--keep-ids] [--settle] FILE|DIR…", "sign recorded Gitea deliveries and post them to a running mozi", runReplay},
		{"templates", "check [FILE] | show ACTION [BUSINESS]", "validate toolchain templates, or show one action's", runTemplates},
		{"prompt", "render --repo R --issue N [--action A] [--agent X] | --payload FILE", "print exactly the prompt mozi would send to an agent", runPrompt},
		{"doctor", "[--config FILE]", "check configuration, database, Gitea access, webhooks and agents, one line each", runDoctor},
		{"webhook", "install [--repo OWNER/NAME…] [--org ORG] [--url URL]", "create or update the Gitea webhook that sends mozi its events", runWebhook},
		{"console", "register [--redirect-url URL] [--name NAME]", "register the web console in Gitea as an OAuth2 application", runConsole},
		{"version", "", "print the version", runVersion},
		{"help", "[COMMAND]", "show help for mozi or one command", nil},
	}
}

// usagef is a wrong command line: mozi exits with status 2.
func usagef(format string, args ...any) error { return cli.Usagef(format, args...) }

func exitCode(err error) int { return cli.ExitCode(err) }

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	e := &env{getenv: getenv, stdout: stdout, stderr: stderr}
	if len(args) == 0 {
		printHelp(stderr)
		return usagef("no command given")
	}
	name := args[0]
	switch name {
	case "-h", "--help", "-help", "help":
		if len(args) > 1 && name == "help" {
			return runHelpFor(e, args[1])
		}
		printHelp(stdout)
		return nil
	case "--version", "-version":
		return runVersion(ctx, e, nil)
	}
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			if err := c.run(ctx, e, args[1:]); !errors.Is(err, errHelp) {
				return err
			}
			return nil
		}
	}
	printHelp(stderr)
	return usagef("unknown command %q", name)
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, `mozi orchestrates AI coding agents through Gitea: webhooks become tasks,
tasks spawn agents, and Gitea's own events move each task to done.

Usage: mozi COMMAND [FLAGS]

Commands:`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, `
Run "mozi help COMMAND" or "mozi COMMAND --help" for a command's flags.
Configuration: --config FILE, else $MOZI_CONFIG, else ./mozi.yaml, else defaults.`)
}

func runHelpFor(e *env, name string) error {
	for _, c := range commands() {
		if c.name == name && c.run != nil {
			if err := c.run(context.Background(), e, []string{"--help"}); !errors.Is(err, errHelp) {
				return err
			}
			return nil
		}
	}
	return usagef("unknown command %q", name)
}

// newFlagSet builds a subcommand's flag set whose --help prints usage to
// stdout and whose errors go to stderr.
func newFlagSet(e *env, name string) *flag.FlagSet {
	fs := flag.NewFlagSet("mozi "+name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		w := fs.Output()
		for _, c := range commands() {
			if c.name == name {
				fmt.Fprintf(w, "Usage: mozi %s %s\n\n%s.\n", c.name, c.args, c.summary)
			}
		}
		hasFlags := false
		fs.VisitAll(func(*flag.Flag) { hasFlags = true })
		if hasFlags {
			fmt.Fprintln(w, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

// parseFlags parses args; --help prints usage to stdout and stops the
// command without an error (errHelp).
func parseFlags(e *env, fs *flag.FlagSet, args []string) error {
	fs.SetOutput(e.stderr)
	for _, a := range args {
		if a == "-h" || a == "--help" || a == "-help" {
			fs.SetOutput(e.stdout)
			fs.Usage()
			return errHelp
		}
	}
	// Flags may come before or after positional arguments
	// (mozi migrate status --config x): parse, set aside one positional,
	// parse the rest.
	// The flag package would print the error and the whole usage; mozi
	// prints one line (main adds "mozi: ") and where to find the usage.
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return usagef("%v (mozi %s --help lists its flags)", err, strings.TrimPrefix(fs.Name(), "mozi "))
		}
		if fs.NArg() == 0 {
			break
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return fs.Parse(append([]string{"--"}, positional...))
}

// errHelp stops a command after it printed its help.
var errHelp = cli.ErrHelp
