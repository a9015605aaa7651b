package config

import (
	"strings"
	"testing"
)

// TestMCPFastPath: mcp.fast_path defaults to on, loads false when set so,
// and is strict (a non-boolean or a misspelt key is an error naming it).
func TestMCPFastPath(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		want       bool
	}{
		{name: "default", yaml: "", want: DefaultFastPath},
		{name: "mcp without it", yaml: "mcp:\n  cache_ttl: 5s\n", want: true},
		{name: "on", yaml: "mcp:\n  fast_path: true\n", want: true},
		{name: "off", yaml: "mcp: {fast_path: false}\n", want: false},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse([]byte(c.yaml), t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MCP.FastPath == nil || *cfg.MCP.FastPath != c.want {
				t.Fatalf("mcp.fast_path = %v, want %v", cfg.MCP.FastPath, c.want)
			}
		})
	}
	for _, c := range []struct{ yaml, want string }{
		{yaml: "mcp:\n  fast_path: sometimes\n", want: "line 2"},
		{yaml: "mcp:\n  fastpath: false\n", want: `line 2: unknown key "fastpath"`},
	} {
		if _, err := Parse([]byte(c.yaml), t.TempDir()); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", c.yaml, err, c.want)
		}
	}
}
