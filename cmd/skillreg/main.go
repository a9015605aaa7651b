// Command skillreg turns git repositories of Agent Skills into one verified
// catalog served over MCP. Run `skillreg help` for the commands.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// Exit codes.
const (
	exitOK       = 0
	exitProblems = 1 // validation problems, a failed sync, a runtime failure
	exitUsage    = 2 // bad flags or arguments, unreadable input
)

type command struct {
	name, args, summary string
	run                 func(ctx context.Context, env *env, args []string) int
}

// env is a command's world: its streams, so tests can drive commands.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

func commands() []command {
	return []command{
		{"serve", "[--config FILE] [--listen ADDR] [--data DIR]", "run the catalog server (MCP at /mcp)", cmdServe},
		{"mcp", "--stdio [--config FILE] [--data DIR]", "serve MCP over stdio for a local client", cmdMCP},
		{"validate", "DIR...", "check skill trees the way the server judges them", cmdValidate},
		{"sync", "[--config FILE] [--data DIR] [SOURCE...]", "run one sync pass of the sources and exit (for cron and debugging)", cmdSync},
		{"store", "check|rebuild|backup FILE [--data DIR]", "check, rebuild or back up the store (skillreg.db)", cmdStore},
		{"token", "new NAME [--sources a,b]", "create a client token (printed once) and its configuration lines", cmdToken},
		{"index", "DIR [--json]", "index a tree once and print what was found and how long it took", cmdIndex},
		{"new-skill", "DIR/NAME", "create a new skill that validate accepts", cmdNewSkill},
		{"pull", "--server URL [--into DIR] [SKILL...]", "install skills from a Skills-extension server, verified and locked", cmdPull},
		{"outdated", "[--into DIR]", "compare skills.lock with what the servers serve now", cmdOutdated},
		{"version", "", "print the version", cmdVersion},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go tuneGC(ctx)
	e := &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv}
	os.Exit(run(ctx, e, os.Args[1:]))
}

func run(ctx context.Context, e *env, args []string) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(e.stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(ctx, e, args[1:])
		}
	}
	fmt.Fprintf(e.stderr, "skillreg: unknown command %q\n\n", args[0])
	usage(e.stderr)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "skillreg: a verified catalog of Agent Skills from git, served over MCP.")
	fmt.Fprintln(w, "\nUsage:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  skillreg %-9s %-40s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'skillreg COMMAND --help' for a command's flags.")
}

// newFlags returns a flag set that prints a command's usage on --help.
func newFlags(e *env, name, args, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(e.stderr)
	fs.Usage = func() {
		fmt.Fprintf(e.stderr, "Usage: skillreg %s %s\n\n%s.\n", name, args, summary)
		if hasFlags(fs) {
			fmt.Fprintln(e.stderr, "\nFlags:")
			fs.PrintDefaults()
		}
	}
	return fs
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// parseFlags parses flags anywhere among the arguments (flag stops at the
// first non-flag) and maps --help to exit 0 and other errors to usage.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, int, bool) {
	var rest []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, exitOK, false
			}
			return nil, exitUsage, false
		}
		args = fs.Args()
		if len(args) == 0 {
			return rest, 0, true
		}
		rest = append(rest, args[0])
		args = args[1:]
	}
}

func cmdVersion(_ context.Context, e *env, args []string) int {
	fs := newFlags(e, "version", "", "print the version")
	if _, code, ok := parseFlags(fs, args); !ok {
		return code
	}
	fmt.Fprintf(e.stdout, "skillreg %s\n", buildVersion())
	return exitOK
}

func buildVersion() string {
	if version != "dev" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				return "dev-" + s.Value[:12]
			}
		}
	}
	return version
}
