package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/skillreg/skillreg/internal/deepjson"
	"github.com/skillreg/skillreg/internal/hostile"
)

// TestPullHostileJSONExits: `skillreg pull` against a server that answers
// with JSON nested 2,000,000 levels deep, or with more bytes than allowed,
// exits 3 with one line naming the bound, and writes nothing.
func TestPullHostileJSONExits(t *testing.T) {
	deep := func(base string) []byte { return deepjson.Embed([]byte(base), "x", deepjson.Arrays(2_000_000)) }
	cases := []struct {
		name string
		a    hostile.Answer
		want string
	}{
		{"skills/list", hostile.Answer{Method: "skills/list", Result: deep(`{"skills":[]}`)}, "skills/list: protocol error: response JSON: json nested too deeply: more than 1000 levels"},
		{"resources/read, event stream", hostile.Answer{Method: "resources/read", Result: deep(`{"contents":[]}`), SSE: true}, "resources/read: protocol error: response JSON: json nested too deeply: more than 1000 levels"},
		{"skills/list over 128 MiB", hostile.Answer{Method: "skills/list", Result: []byte(`{"skills":[]}`), Pad: 128 << 20}, "skills/list: protocol error: response body larger than allowed: more than 134217728 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			inner := hostile.New(t, hostile.Options{Skills: []hostile.Skill{{Path: "acme/good"}}})
			srv := hostile.NewRaw(t, inner, c.a)
			dir := filepath.Join(t.TempDir(), "skills")
			code, stdout, stderr := runCLI(t, "pull", "--server", srv.URL, "--into", dir)
			if code != exitUnreachable {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %.500s", code, exitUnreachable, stdout, stderr)
			}
			if !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") > 0 {
				t.Errorf("stderr %.500q, want one line with %q", stderr, c.want)
			}
			if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
				t.Errorf("wrote %d entries into %s", len(ents), dir)
			}
		})
	}
}
