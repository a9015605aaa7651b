//go:build linux

package registry

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// spareWatches is what a test may add to its tree after the probe (a
// skill or a group created while it runs).
const spareWatches = 8

// needWatches skips t when the kernel refuses the inotify watches it
// needs before any code under test runs: another process of the user
// holds them (an IDE, a file indexer, other tests), and a test of change
// detection would fail on that machine for no fault of the code. It
// probes with an inotify instance of its own: one watch for every
// directory beneath root (the tree the test watches, written already),
// and spareWatches more, then gives them back. Only the kernel's
// exhaustion errors (ENOSPC: max_user_watches; EMFILE:
// max_user_instances) skip; any other error fails the test. A watch
// refused after the probe (another process took the last ones
// meanwhile) is not hidden: the test fails, and startWatched names the
// watch state.
func needWatches(t *testing.T, root string) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	if err != nil {
		if errors.Is(err, syscall.EMFILE) {
			t.Skipf("the kernel refuses an inotify instance before the test runs (%v): the user's instances are used up (%s)", err, limits("max_user_instances", "max_inotify_instances"))
		}
		t.Fatalf("inotify_init1: %v", err)
	}
	defer unix.Close(fd)
	var dirs []string
	if err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	spare := t.TempDir()
	for i := range spareWatches {
		p := filepath.Join(spare, fmt.Sprint(i))
		if err := os.Mkdir(p, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, p)
	}
	for i, p := range dirs {
		if _, err := unix.InotifyAddWatch(fd, p, unix.IN_CREATE); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				t.Skipf("the kernel refuses inotify watches before the test runs: %d of the %d it needs were granted (%v); another process of this user holds the others (%s)", i, len(dirs), err, limits("max_user_watches", "max_inotify_watches"))
			}
			t.Fatalf("probe watch %s: %v", p, err)
		}
	}
}

// limits names one of the kernel's inotify limits, for a skip's reason:
// the user's (fs.inotify), and its user namespace's (user.*) when that
// is lower.
func limits(fsName, userName string) string {
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			return "unknown"
		}
		return strings.TrimSpace(string(b))
	}
	s := "fs.inotify." + fsName + " = " + read("/proc/sys/fs/inotify/"+fsName)
	if u := read("/proc/sys/user/" + userName); u != "unknown" && !strings.HasSuffix(s, " = "+u) {
		s += ", this user namespace's user." + userName + " = " + u
	}
	return s
}
