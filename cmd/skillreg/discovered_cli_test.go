package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/mcp"
)

// runStdio runs `skillreg mcp --stdio ARGS` in-process over pipes and
// connects the SDK's client to it; the command ends when the test does.
func runStdio(t *testing.T, args ...string) *sdk.ClientSession {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr bytes.Buffer
	e := &env{stdin: inR, stdout: outW, stderr: &stderr, getenv: func(string) string { return "" }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		code := run(ctx, e, append([]string{"mcp", "--stdio"}, args...))
		outW.Close()
		done <- code
	}()
	c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil)
	sdk.AddSendingCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](c, "skills/list")
	cs, err := c.Connect(context.Background(), &sdk.IOTransport{Reader: outR, Writer: inW}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		cancel()
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() {
		cs.Close()
		inW.Close()
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("mcp --stdio: exit %d\n%s", code, stderr.String())
		}
	})
	return cs
}

// TestSyncAndStdioServeDiscoveredSources: `skillreg sync` lists a github:
// template once and syncs every discovered source with the configured
// ones (a template's name syncs its discovered sources), and with the
// API gone reports the failed listing and syncs the stored set; `mcp
// --stdio --data` then serves them from the store, and without --data
// refuses the template, saying why.
func TestSyncAndStdioServeDiscoveredSources(t *testing.T) {
	f := newDiscoveredFixture(t)
	data := t.TempDir()
	yaml, _, _ := discoveredConfig(t, f, data)
	cfgFile := filepath.Join(t.TempDir(), "skillreg.yaml")
	if err := os.WriteFile(cfgFile, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := runCLI(t, "sync", "--config", cfgFile)
	if code != exitOK {
		t.Fatalf("sync: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, src := range []string{"acme-skills", "acme-tools", "local"} {
		if !strings.Contains(stdout, src+": updated in ") {
			t.Errorf("sync did not sync %s:\n%s", src, stdout)
		}
	}
	code, stdout, stderr = runCLI(t, "sync", "--config", cfgFile, "acme")
	if code != exitOK || !strings.Contains(stdout, "acme-skills: ") || !strings.Contains(stdout, "acme-tools: ") || strings.Contains(stdout, "local: ") {
		t.Fatalf("sync acme: exit %d, want acme-skills and acme-tools only:\n%s%s", code, stdout, stderr)
	}

	f.gh.Close() // from here on, the API is gone
	// A listing that fails is reported, and the stored set still synced.
	code, stdout, stderr = runCLI(t, "sync", "--config", cfgFile)
	if code != exitProblems || !strings.Contains(stdout, "discovery: failed: ") || !strings.Contains(stdout, "acme-skills: ") || !strings.Contains(stdout, "local: ") {
		t.Fatalf("sync with the API gone: exit %d, want 1, the discovery failure, and the stored sources synced:\n%s%s", code, stdout, stderr)
	}
	cs := runStdio(t, "--config", cfgFile, "--data", data)
	var uris []string
	entries, _ := listAll(t, cs)
	for _, e := range entries {
		uris = append(uris, e.URI)
		verifyEntry(t, cs, e)
	}
	slices.Sort(uris)
	want := []string{"skill://acme-skills/deploy/SKILL.md", "skill://acme-tools/lint/SKILL.md", "skill://local/notes/SKILL.md"}
	if !slices.Equal(uris, want) {
		t.Errorf("mcp --stdio --data serves %v, want %v", uris, want)
	}

	code, _, stderr = runCLI(t, "mcp", "--stdio", "--config", cfgFile)
	if code != exitUsage || !strings.Contains(stderr, "github: sources (acme) need --data DIR") {
		t.Errorf("mcp --stdio without --data: exit %d, %q", code, stderr)
	}
}
