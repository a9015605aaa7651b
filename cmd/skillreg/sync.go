package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/skillreg/skillreg/catalog"
)

// exitInterrupted is sync's exit code when SIGINT or SIGTERM stops it:
// 130 (128 + SIGINT), what a shell reports for a command Ctrl-C ended.
const exitInterrupted = 130

func cmdSync(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "sync", "[--config FILE] [--data DIR] [SOURCE...]", "Run one sync pass of the configured sources (all, or those named) and exit:\n"+
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
	for _, n := range names {
		if !known[n] {
			fmt.Fprintf(e.stderr, "skillreg sync: no source named %q\n", n)
			return exitUsage
		}
	}
	failed := 0
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

func commitSuffix(c string) string {
	if c == "" {
		return ""
	}
	return ", commit " + c
}
