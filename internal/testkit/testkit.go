// Package testkit holds the small helpers that tests across the module
// wrote again and again: files on disk, a minimal SKILL.md, waiting for a
// condition, a logger into the test's output. Only tests import it.
//
// It has no fakes and no fixtures: those live with what they imitate
// (internal/gittest, internal/fakegithub, ...).
package testkit

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// WaitTimeout bounds WaitUntil. It is a bound for a broken build, not a
// timing assertion: generous because tests run with -race on two shared
// cores, where a healthy condition can take seconds.
const WaitTimeout = 60 * time.Second

// WriteFiles writes files (slash-separated path relative to root -> content)
// under root, creating folders as needed, mode 0644. It fails tb on the
// first error.
func WriteFiles(tb testing.TB, root string, files map[string]string) {
	tb.Helper()
	for p, data := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(data), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
}

// SkillMD returns the smallest valid SKILL.md for a skill called name: its
// frontmatter names it and describes it as "The <name> skill.", and the body
// is a heading.
func SkillMD(name string) string {
	return "---\nname: " + name + "\ndescription: The " + name + " skill.\n---\n# " + name + "\n"
}

// WaitUntil polls cond until it holds, failing tb with what (the condition
// in words) after WaitTimeout. Use it only where the event has no signal to
// wait on (another process, a server's internal state); a channel or
// testing/synctest is better where there is one.
func WaitUntil(tb testing.TB, what string, cond func() bool) {
	tb.Helper()
	deadline := time.Now().Add(WaitTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			tb.Fatalf("timed out after %v waiting for %s", WaitTimeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Logger returns a text logger at level that writes each record to tb.Log,
// so a failing test shows what the code under test logged and a passing one
// stays quiet (without -v). Stop whatever logs before the test ends: tb.Log
// after the test has completed panics.
func Logger(tb testing.TB, level slog.Level) *slog.Logger {
	return slog.New(slog.NewTextHandler(logWriter{tb}, &slog.HandlerOptions{Level: level}))
}

// logWriter hands each line the handler writes to tb.Log.
type logWriter struct{ tb testing.TB }

func (w logWriter) Write(p []byte) (int, error) {
	w.tb.Helper()
	w.tb.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Buffer is a bytes.Buffer that goroutines may write while a test reads
// it: the log destination of a daemon, a registry or a server under test.
// The zero value is ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
