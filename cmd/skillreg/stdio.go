package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func cmdMCP(ctx context.Context, e *env, args []string) int {
	fs := newFlags(e, "mcp", "--stdio [--config FILE] [--data DIR]", "Serve the MCP surface over stdio for a local client (Claude Desktop, Claude Code,\n"+
		"Cursor). Without --data it keeps its state in memory (several clients may each start\n"+
		"their own copy); with --data it uses that directory and fails if another process holds it.\n"+
		"github: templates need --data: it serves the repositories sync or serve discovered there.\n"+
		"Logs go to stderr. Exit 0 when the client disconnects, 1 when it cannot start, 2 on bad flags")
	stdio := fs.Bool("stdio", false, "serve over stdin and stdout (required)")
	cfgPath := fs.String("config", "", "configuration file (default: the embedded example catalog)")
	data := fs.String("data", "", "data directory (default: state in memory only)")
	rest, code, ok := parseFlags(fs, args)
	if !ok {
		return code
	}
	if !*stdio || len(rest) > 0 {
		fmt.Fprintln(e.stderr, "skillreg mcp: --stdio is required (the HTTP server is `skillreg serve`)")
		return exitUsage
	}
	cfg, err := loadConfig(*cfgPath)
	if err != nil {
		fmt.Fprintf(e.stderr, "skillreg mcp: %v\n", err)
		return exitUsage
	}
	memory := *data == ""
	if !memory {
		cfg.DataDir = *data
	}
	// A github: template's repositories are listed by serve and sync,
	// which keep them in the data directory's store; stdio serves what
	// that store holds and asks GitHub's API nothing. In memory there is
	// no such store.
	if memory && hasTemplates(cfg) {
		fmt.Fprintf(e.stderr, "skillreg mcp: github: sources (%s) need --data DIR: mcp --stdio serves the repositories `skillreg sync --data DIR` (or serve) discovered and stored there; it does not list them itself\n", strings.Join(templateNames(cfg), ", "))
		return exitUsage
	}
	// A local client is its user: access control applies to HTTP callers.
	cfg.Clients = nil
	log, _ := newLogger(e.stderr, cfg.Log)
	// The MCP surface alone: no listener, no webhook, web pages, mirror
	// or TLS (their settings are not even read).
	d, err := openDaemon(ctx, cfg, log, stdioSurfaces, memory)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK // stopped while starting
		}
		log.Error("cannot start", "err", err)
		return exitProblems
	}
	defer d.Close()
	for _, name := range templateNames(cfg) {
		if len(d.groupMembers(name)) == 0 {
			log.Warn("the store holds no repository discovered for this github: template; `skillreg sync --data DIR` lists them", "source", name)
		}
	}
	regCtx, stopReg := context.WithCancel(context.Background())
	regDone := make(chan struct{})
	go func() { d.Registry.Run(regCtx); close(regDone) }()
	defer func() { stopReg(); <-regDone }()

	// A local client has nothing stored to be served while the first sync
	// runs: wait for it (bounded), rather than answer an empty catalog.
	waitReady(ctx, d, readyWait)
	t := &sdk.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	log.Info("serving MCP over stdio", "memory", memory, "sources", len(d.Registry.Sources()))
	if err := d.MCP.SDK().Run(ctx, t); err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, io.EOF) {
		log.Error("stdio session ended", "err", err)
	}
	return exitOK
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

// readyWait bounds how long stdio mode waits for the first syncs.
const readyWait = 60 * time.Second

func waitReady(ctx context.Context, d *Daemon, max time.Duration) {
	deadline := time.Now().Add(max)
	for !d.Registry.Ready() && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(20 * time.Millisecond)
	}
}
