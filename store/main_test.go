package store

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// Helper processes: the test binary re-executed with helperEnv set plays
// another skillreg process (holding the file, or running out of space).
const (
	helperEnv     = "SKILLREG_STORE_TEST_HELPER"
	helperPathEnv = "SKILLREG_STORE_TEST_PATH"
)

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "":
		os.Exit(m.Run())
	case "hold":
		os.Exit(holdHelper(os.Getenv(helperPathEnv)))
	case "disk-full":
		os.Exit(diskFullHelper(os.Getenv(helperPathEnv)))
	default:
		fmt.Fprintln(os.Stderr, "unknown helper", os.Getenv(helperEnv))
		os.Exit(2)
	}
}

// holdHelper opens the store, says "ready" and holds it until its stdin
// closes.
func holdHelper(path string) int {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	s.Close()
	return 0
}

// helper is a running helper process.
type helper struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

func startHelper(t *testing.T, kind, path string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+kind, helperPathEnv+"="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(func() { h.stop(t) })
	return h
}

func (h *helper) line(t *testing.T) string {
	t.Helper()
	l, err := h.out.ReadString('\n')
	if err != nil {
		t.Fatalf("helper: %v (read %q)", err, l)
	}
	return strings.TrimSpace(l)
}

func (h *helper) stop(t *testing.T) {
	if h.stdin == nil {
		return
	}
	h.stdin.Close()
	h.stdin = nil
	if err := h.cmd.Wait(); err != nil {
		t.Errorf("helper: %v", err)
	}
}

// diskFullReport is what the disk-full helper found.
type diskFullReport struct {
	SaveErr    string // the failed SaveSnapshot's error
	LoadCommit string // the commit Load returned after the failure
	LoadErr    string
	CheckErr   string
}

// diskFullHelper lets the store file grow by at most 64 KiB past its pages (the kernel
// then refuses writes past that size with EFBIG, as a full disk refuses
// them with ENOSPC), tries to save a much larger snapshot, and reports
// what happened and what the store then serves.
func diskFullHelper(path string) int {
	t := &helperTB{}
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	// The limit counts from the pages in use, not the file's size: bbolt
	// grows a file mapped as large as the store maps it 16 MiB at a time,
	// ahead of its pages.
	var used int64
	if err := s.db.View(func(tx *bolt.Tx) error { used = tx.Size(); return nil }); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	big := corpusSnapshot(t, "src", 400)
	big.Commit = "c2"
	// Go ignores SIGXFSZ, so writes past the limit fail instead of
	// killing the process.
	lim := syscall.Rlimit{Cur: uint64(used) + 64<<10, Max: math.MaxUint64}
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &lim); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	var r diskFullReport
	if err := s.SaveSnapshot(big, stateOf(big)); err != nil {
		r.SaveErr = err.Error()
	}
	if ps, err := s.Load(); err != nil {
		r.LoadErr = err.Error()
	} else if len(ps) == 1 && ps[0].Snapshot != nil {
		r.LoadCommit = ps[0].Snapshot.Commit
	}
	if err := s.Check(); err != nil {
		r.CheckErr = err.Error()
	}
	s.Close()
	b, _ := json.Marshal(r)
	fmt.Println(string(b))
	return 0
}

// helperTB lets the test helpers build corpora outside a test.
type helperTB struct{ testing.TB }

func (h *helperTB) Helper() {}
func (h *helperTB) TempDir() string {
	d, err := os.MkdirTemp("", "skillreg-store-helper-")
	if err != nil {
		panic(err)
	}
	return d
}
func (h *helperTB) Fatal(args ...any) { panic(fmt.Sprint(args...)) }
func (h *helperTB) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf(format, args...))
}
