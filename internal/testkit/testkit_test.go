package testkit

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func TestWriteFiles(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	WriteFiles(t, root, map[string]string{
		"a/SKILL.md":    SkillMD("a"),
		"a/deep/x.txt":  "x\n",
		"top-level.txt": "",
	})
	for p, want := range map[string]string{"a/SKILL.md": SkillMD("a"), "a/deep/x.txt": "x\n", "top-level.txt": ""} {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(p)))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", p, got, err, want)
		}
	}
}

func TestSkillMD(t *testing.T) {
	t.Parallel()
	got := SkillMD("lint")
	if !strings.HasPrefix(got, "---\nname: lint\ndescription: The lint skill.\n---\n") {
		t.Fatalf("SkillMD(lint) = %q", got)
	}
}

func TestWaitUntil(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	WaitUntil(t, "three polls", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("cond called %d times, want 3", n.Load())
	}
}

// recorder is a testing.TB that keeps what is logged, to check Logger.
type recorder struct {
	testing.TB
	lines []string
}

func (r *recorder) Helper()         {}
func (r *recorder) Log(args ...any) { r.lines = append(r.lines, fmt.Sprint(args...)) }

func TestLogger(t *testing.T) {
	t.Parallel()
	r := &recorder{TB: t}
	log := Logger(r, slog.LevelWarn)
	log.Info("dropped")
	log.Warn("kept", "source", "team")
	if len(r.lines) != 1 || !strings.Contains(r.lines[0], "msg=kept source=team") || strings.HasSuffix(r.lines[0], "\n") {
		t.Fatalf("logged %q, want one line with msg=kept source=team", r.lines)
	}
}
