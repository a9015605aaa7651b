package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/skillreg/skillreg/mcp"
)

// buildBinary builds skillreg once per test process.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "skillreg")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestStdioMode drives `skillreg mcp --stdio` as a local client would:
// the official SDK client starts the process and talks over its pipes.
func TestStdioMode(t *testing.T) {
	bin := buildBinary(t)
	for _, v := range []string{"2025-11-25", "2026-07-28"} {
		cmd := exec.Command(bin, "mcp", "--stdio")
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		var stderr strings.Builder
		cmd.Stderr = &stderr
		c := sdk.NewClient(&sdk.Implementation{Name: "stdio-test", Version: "1"}, nil)
		sdk.AddSendingCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](c, "skills/list")
		cs, err := c.Connect(context.Background(), &sdk.CommandTransport{Command: cmd}, &sdk.ClientSessionOptions{ProtocolVersion: v})
		if err != nil {
			t.Fatalf("%s: connect: %v\n%s", v, err, stderr.String())
		}
		list, err := sdk.CallCustomMethod[*mcp.ListSkillsParams, *mcp.ListSkillsResult](context.Background(), cs, "skills/list", &mcp.ListSkillsParams{})
		if err != nil || len(list.Skills) < 4 {
			t.Fatalf("%s: skills/list: %v %d", v, err, len(list.Skills))
		}
		var tl mcp.ListSkillsOutput
		if e := callTool(t, cs, "list_skills", map[string]any{}, &tl); e != "" || len(tl.Skills) < 4 {
			t.Fatalf("%s: list_skills: %q", v, e)
		}
		verifyEntry(t, cs, list.Skills[0])
		if err := cs.Close(); err != nil {
			t.Logf("close: %v", err)
		}
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
			t.Errorf("%s: exit %v\n%s", v, cmd.ProcessState, stderr.String())
		}
		if strings.Contains(stderr.String(), `"level":"ERROR"`) {
			t.Errorf("%s: errors on stderr:\n%s", v, stderr.String())
		}
	}
}

func TestStdioFlagsAndLockedData(t *testing.T) {
	if code, _, _ := runCLI(t, "mcp"); code != exitUsage {
		t.Fatalf("mcp without --stdio: exit %d", code)
	}
	if code, _, _ := runCLI(t, "mcp", "--stdio", "--bogus"); code != exitUsage {
		t.Fatalf("bad flag: exit %d", code)
	}
	data := t.TempDir()
	startDaemon(t, "data_dir: "+data+"\n", "")
	code, _, stderr := runCLI(t, "mcp", "--stdio", "--data", data)
	if code != exitProblems || !strings.Contains(stderr, "data directory in use") {
		t.Fatalf("locked data dir: exit %d %q", code, stderr)
	}
}
