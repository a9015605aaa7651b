package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/skillreg/skillreg/config"
	"github.com/skillreg/skillreg/pull"
	"github.com/skillreg/skillreg/sigverify"
)

// exitUnreachable is pull's and outdated's exit code when the server cannot
// be reached or does not speak the Skills extension.
const exitUnreachable = 3

const pullArgs = "--server URL [--token-env NAME] [--into DIR | --client NAME [--global]] [--verify-keys FILE] [--locked | --update NAME] [SKILL...]"

const pullHelp = `Install skills from a server that speaks the MCP Skills extension into
an agent's skills folder, verified and locked. Each SKILL names a skill by
its SKILL.md URI or its frontmatter name; without one, every skill the
server lists is pulled.

Every file is read through resources/read and checked against the skill's
entry (size, SHA-256 digest, SKILL.md frontmatter field by field; no file
outside the entry or the skill, within 512 files and 16 MiB). A skill that
fails a check is not written at all; the others proceed. A verified skill
is written to DIR/<name>/ atomically (the old version stays until the new
one is complete): files 0644, and 0755 for files under scripts/ that start
with "#!". DIR/skills.lock records each skill's server, URI, files with
digests and sizes, provenance and pull time.

  --locked       install exactly what skills.lock records; if the server
                 now serves anything else for a locked skill, write nothing
  --update NAME  move one locked skill to what its server serves now and
                 print which files were added, changed and removed
  --verify-keys FILE
                 trust no server: install a skill only if its proof (the
                 git commit, tag and tree objects the server names in the
                 entry's provenance) ties every byte pulled to a commit or
                 tag signed by a key in FILE (an OpenPGP keyring, armored
                 or binary, or an ssh allowed_signers file); a skill with
                 no proof, or whose bytes, trees, commit or signature do
                 not check out, is refused. skills.lock records the commit,
                 signer and key; a skill recorded so is installed again
                 only with --verify-keys (and by --locked only as the same
                 commit and key)

The folder is --into DIR, or the folder of --client in the project (the
working directory), or with --global in your home:
` + "%s" + `
Without either: .agents/skills in the project, which Codex, Cursor,
Copilot and Gemini CLI read.

Exit codes: 0 done, 1 a skill failed verification or differs from the lock,
2 usage, 3 server unreachable or not speaking the Skills extension`

// pullFlags are the flags pull and outdated share.
type pullFlags struct {
	server, tokenEnv, into, client, protocol string
	global                                   bool
}

func (p *pullFlags) register(fs interface {
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&p.server, "server", "", "MCP endpoint of the server (e.g. http://127.0.0.1:8080/mcp)")
	fs.StringVar(&p.tokenEnv, "token-env", "", "environment variable holding a bearer token for --server")
	fs.StringVar(&p.into, "into", "", "target skills folder")
	fs.StringVar(&p.client, "client", "", "agent whose skills folder to use, and the MCP client name to send: "+strings.Join(pull.ClientNames(), ", "))
	fs.BoolVar(&p.global, "global", false, "with --client: the agent's user folder under your home instead of the project's")
	fs.StringVar(&p.protocol, "protocol", "", "MCP protocol version to ask for (default: the newest, falling back to 2025-11-25)")
}

// options turns the flags into pull options, or prints a usage error.
func (p *pullFlags) options(e *env, cmd string) (pull.Options, bool) {
	usageErr := func(format string, args ...any) (pull.Options, bool) {
		fmt.Fprintf(e.stderr, "skillreg %s: %s\n", cmd, fmt.Sprintf(format, args...))
		return pull.Options{}, false
	}
	log, _ := newLogger(e.stderr, config.Log{Level: "warn", Format: "text"})
	o := pull.Options{
		Server: p.server, ProtocolVersion: p.protocol,
		ClientName: "skillreg", ClientVersion: buildVersion(),
		Logger: log,
	}
	if p.client != "" {
		o.ClientName = p.client
	}
	if p.tokenEnv != "" {
		if p.server == "" {
			return usageErr("--token-env needs --server: the token is sent only to the server you name")
		}
		o.Token = e.getenv(p.tokenEnv)
		if o.Token == "" {
			return usageErr("environment variable %s is empty or unset", p.tokenEnv)
		}
	}
	switch {
	case p.into != "":
		o.Dir = p.into
	default:
		client := p.client
		if client == "" {
			client = pull.DefaultClient
		}
		wd, err := os.Getwd()
		if err != nil {
			return usageErr("%v", err)
		}
		home := e.getenv("HOME")
		if home == "" {
			home, _ = os.UserHomeDir()
		}
		dir, err := pull.ClientDir(client, p.global, wd, home)
		if err != nil {
			return usageErr("%v", err)
		}
		o.Dir = dir
	}
	return o, true
}

func clientFolders() string {
	var b strings.Builder
	for _, c := range pull.Clients {
		fmt.Fprintf(&b, "  %-12s %-18s ~/%s\n", c.Name, c.Project, c.User)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func cmdPull(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "pull", pullArgs, fmt.Sprintf(pullHelp, clientFolders()))
	var pf pullFlags
	pf.register(fs)
	locked := fs.Bool("locked", false, "install exactly what skills.lock records, or nothing")
	update := fs.String("update", "", "move the locked skill `NAME` forward and print what changed")
	force := fs.Bool("force", false, "replace a skill folder that skills.lock does not record")
	verifyKeys := fs.String("verify-keys", "", "install only skills whose proof verifies with the keys in `FILE` (OpenPGP keyring or ssh allowed_signers)")
	names, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	usageErr := func(msg string) int {
		fmt.Fprintf(e.stderr, "skillreg pull: %s\n", msg)
		return exitUsage
	}
	switch {
	case *locked && *update != "":
		return usageErr("--locked and --update exclude each other")
	case (*locked || *update != "") && len(names) > 0:
		return usageErr("--locked and --update take no SKILL arguments")
	case !*locked && *update == "" && pf.server == "":
		return usageErr("--server is required (the MCP endpoint, e.g. http://127.0.0.1:8080/mcp)")
	}
	o, ok := pf.options(e, "pull")
	if !ok {
		return exitUsage
	}
	o.Force = *force
	if *verifyKeys != "" {
		keys, err := sigverify.LoadFile(*verifyKeys)
		if err != nil {
			return usageErr(fmt.Sprintf("--verify-keys: %v", err))
		}
		o.Keys = keys
	}

	var rep *pull.Report
	var err error
	switch {
	case *locked:
		rep, err = pull.Locked(ctx, o)
	case *update != "":
		rep, err = pull.Update(ctx, o, *update)
	default:
		rep, err = pull.Pull(ctx, o, names)
	}
	code = exitOK
	if rep != nil {
		code = printReport(e, o.Dir, rep, *locked, *update != "")
	}
	if err != nil {
		printErr(e.stderr, "pull", err)
		if errors.Is(err, pull.ErrKeysRequired) {
			fmt.Fprintln(e.stderr, "skillreg pull: pass --verify-keys FILE with the signers' keys (an OpenPGP keyring or allowed_signers file)")
		}
		code = max(code, pullExitCode(err))
	}
	return code
}

func files(n int) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

// printErr prints an error, one line for each of several joined ones.
func printErr(w io.Writer, cmd string, err error) {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			printErr(w, cmd, e)
		}
		return
	}
	fmt.Fprintf(w, "skillreg %s: %v\n", cmd, err)
}

// printReport prints what a run did: installs on stdout, refusals on
// stderr; it returns the exit code the failures call for.
func printReport(e *env, dir string, rep *pull.Report, locked, update bool) int {
	for _, in := range rep.Installed {
		switch {
		case locked:
			fmt.Fprintf(e.stdout, "installed %s (%s, as locked) into %s\n", in.Name, files(in.Files), filepath.Join(dir, in.Name))
		case !in.Previous:
			fmt.Fprintf(e.stdout, "installed %s (%s) into %s\n", in.Name, files(in.Files), filepath.Join(dir, in.Name))
		case in.Change.Empty():
			fmt.Fprintf(e.stdout, "%s is up to date (%s)\n", in.Name, in.URI)
		default:
			fmt.Fprintf(e.stdout, "updated %s: %s\n", in.Name, in.Change.Summary())
			in.Change.Write(e.stdout, "  ")
		}
		if in.Previous && in.OldCommit != in.NewCommit && in.OldCommit != "" && in.NewCommit != "" && !locked {
			fmt.Fprintf(e.stdout, "  commit   %s -> %s\n", in.OldCommit, in.NewCommit)
		}
		if in.Verified != nil {
			fmt.Fprintf(e.stdout, "  verified %s\n", in.Verified)
		}
	}
	code := exitOK
	for _, f := range rep.Failed {
		what := "not installed"
		if errors.Is(f.Err, pull.ErrVerify) {
			what = "refused"
		}
		fmt.Fprintf(e.stderr, "skillreg pull: %s: %s: %v\n", f.Name, what, f.Err)
		code = max(code, pullExitCode(f.Err))
	}
	if locked && len(rep.Failed) > 0 {
		fmt.Fprintf(e.stderr, "skillreg pull: nothing written: %d locked skill(s) differ from %s or failed verification\n", len(rep.Failed), pull.LockFile)
	}
	if !update && !locked && len(rep.Installed) == 0 && len(rep.Failed) == 0 {
		fmt.Fprintln(e.stdout, "nothing to pull: the server lists no skills")
	}
	return code
}

// pullExitCode maps an error of pull or outdated to its exit code, in this
// one place.
func pullExitCode(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, pull.ErrUnreachable), errors.Is(err, pull.ErrProtocol):
		return exitUnreachable
	case errors.Is(err, pull.ErrAmbiguous), errors.Is(err, pull.ErrNotServed),
		errors.Is(err, pull.ErrNoLock), errors.Is(err, pull.ErrBadLock), errors.Is(err, pull.ErrNotLocked),
		errors.Is(err, pull.ErrKeysRequired):
		return exitUsage
	}
	return exitProblems
}

const outdatedArgs = "[--into DIR | --client NAME [--global]] [--server URL [--token-env NAME]]"

const outdatedHelp = `Compare skills.lock with what the servers serve now: each locked skill is
up to date, changed (with the files added, changed and removed) or gone.
Where a server offers a skill-meta tool for the skill (<name>_skill_meta),
show the latest version and the upgrade instruction for --client (sent as
the MCP client name, so the server can detect it). With --server, only the
skills locked from that server.

Exit codes: 0 all up to date, 1 something changed or is gone, 2 usage,
3 server unreachable or not speaking the Skills extension`

func cmdOutdated(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "outdated", outdatedArgs, outdatedHelp)
	var pf pullFlags
	pf.register(fs)
	rest, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if len(rest) > 0 {
		fmt.Fprintf(e.stderr, "skillreg outdated: unexpected argument %q\n", rest[0])
		return exitUsage
	}
	o, ok := pf.options(e, "outdated")
	if !ok {
		return exitUsage
	}
	sts, err := pull.Outdated(ctx, o)
	code = printOutdated(e.stdout, sts)
	if err != nil {
		printErr(e.stderr, "outdated", err)
		code = max(code, pullExitCode(err))
	}
	return code
}

func printOutdated(w io.Writer, sts []pull.Status) int {
	width := 0
	for _, s := range sts {
		width = max(width, len(s.Name))
	}
	code := exitOK
	for _, s := range sts {
		switch s.State {
		case pull.UpToDate:
			fmt.Fprintf(w, "%-*s  up to date\n", width, s.Name)
		case pull.Changed:
			code = exitProblems
			fmt.Fprintf(w, "%-*s  changed (%s)\n", width, s.Name, s.Change.Summary())
			s.Change.Write(w, "  ")
		case pull.Gone:
			code = exitProblems
			fmt.Fprintf(w, "%-*s  gone: %s no longer serves %s\n", width, s.Name, s.Server, s.URI)
		}
		if m := s.Meta; m != nil {
			latest := m.VersionLatest
			if latest == "" {
				latest = "unknown"
			}
			fmt.Fprintf(w, "  latest version: %s\n", latest)
			switch {
			case m.UpdateCommand != "":
				fmt.Fprintf(w, "  upgrade (%s, %s): %s\n", m.ClientDetected, m.UpdateCommandKind, m.UpdateCommand)
			case m.UpdateDocURL != "":
				fmt.Fprintf(w, "  upgrade: see %s\n", m.UpdateDocURL)
			}
		}
		if s.MetaErr != nil {
			fmt.Fprintf(w, "  skill-meta: %v\n", s.MetaErr)
		}
	}
	return code
}
