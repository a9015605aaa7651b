package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/skillreg/skillreg/catalog"
	"github.com/skillreg/skillreg/config"
)

// exitInterrupted is sync's exit code when SIGINT or SIGTERM stops it:
// 130 (128 + SIGINT), what a shell reports for a command Ctrl-C ended.
const exitInterrupted = 130

func cmdSync(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "sync", "[--config FILE] [--data DIR] [SOURCE...]", "Run one sync pass of the configured sources (all, or those named; a github: template\n"+
		"is listed once and names its discovered sources) and exit:\n"+
		"0 when every source synced, 1 when one failed (the reason is printed), 2 on usage errors,\n"+
		"130 when interrupted (SIGINT or SIGTERM)")
	cfgPath := fs.String("config", "", "configuration file (default: the embedded example catalog)")
	data := fs.String("data", "", "data directory, overriding the configuration")
	names, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg sync: %v\n", err)
		return exitUsage
	}
	if *data != "" {
		cfg.DataDir = *data
	}
	log, _ := newLogger(e.stderr, cfg.Log)
	// A core alone: the store, the git object stores and the registry; no
	// surface is built, so no listener, webhook secret or certificate is
	// needed.
	d, err := openDaemon(ctx, cfg, log, syncSurfaces, false)
	if err != nil && ctx.Err() != nil {
		fmt.Fprintln(e.stderr, "skillreg sync: interrupted")
		return exitInterrupted
	}
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg sync: %v\n", err)
		return exitProblems
	}
	defer d.Close()
	failed := 0
	// The github: templates are listed once: the store's discovered set
	// (served meanwhile by mcp --stdio and at serve's restart) is brought
	// up to date, and every discovered source is synced with the others.
	// A listing that fails leaves the stored set, which is synced.
	if d.disc != nil {
		if err := d.disc.Refresh(ctx); err != nil {
			if ctx.Err() != nil {
				fmt.Fprintln(e.stderr, "skillreg sync: interrupted (during discovery)")
				return exitInterrupted
			}
			failed++
			fmt.Fprintf(e.stdout, "discovery: failed: %v (syncing the discovered sources stored before)\n", d.secrets.Error(err))
		}
	}
	known := map[string]bool{}
	for _, st := range d.Registry.States() {
		known[st.Source] = true
	}
	if len(names) == 0 {
		for n := range known {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	var expanded []string
	for _, n := range names {
		if known[n] {
			expanded = append(expanded, n)
			continue
		}
		if members := d.groupMembers(n); members != nil {
			expanded = append(expanded, members...) // a template: its discovered sources
			continue
		}
		fmt.Fprintf(e.stderr, "skillreg sync: no source named %q\n", n)
		return exitUsage
	}
	names = expanded
	for _, n := range names {
		start := time.Now()
		err := d.Registry.SyncNow(ctx, n)
		dur := time.Since(start).Round(time.Millisecond)
		if ctx.Err() != nil {
			// A signal is no failure of this source or the ones left.
			fmt.Fprintf(e.stderr, "skillreg sync: interrupted (during %s)\n", n)
			return exitInterrupted
		}
		if err != nil {
			failed++
			result, hint := "failed", ""
			for _, st := range d.Registry.States() {
				if st.Source == n && st.LastResult == catalog.ResultStalled {
					result, hint = "stalled ("+string(st.Stalled)+")", st.Hint
				}
			}
			fmt.Fprintf(e.stdout, "%s: %s after %s: %v\n", n, result, dur, err)
			if hint != "" {
				fmt.Fprintf(e.stdout, "%s: %s\n", n, hint)
			}
			continue
		}
		for _, st := range d.Registry.States() {
			if st.Source == n {
				fmt.Fprintf(e.stdout, "%s: %s in %s: %d skills, %d excluded%s\n", n, st.LastResult, dur, st.Skills, st.Excluded, commitSuffix(st.Commit))
			}
		}
	}
	if failed > 0 {
		return exitProblems
	}
	return exitOK
}

// hasTemplates reports whether cfg has a github: template.
func hasTemplates(cfg *config.Config) bool {
	return slices.ContainsFunc(cfg.Sources, func(s config.Source) bool { return s.GitHub != nil })
}

// templateNames are cfg's github: templates' names.
func templateNames(cfg *config.Config) []string {
	var out []string
	for _, s := range cfg.Sources {
		if s.GitHub != nil {
			out = append(out, s.Name)
		}
	}
	return out
}

func commitSuffix(c string) string {
	if c == "" {
		return ""
	}
	return ", commit " + c
}
