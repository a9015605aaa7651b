package fulldisk

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// Mount returns the directory of a fresh tmpfs of size bytes, ok=true,
// when the caller runs in the child process; there the test body goes on
// and writes to dir. In the parent it runs the test again in a child
// process with a private mount namespace, reports the child's output and
// outcome as the test's own, and returns ok=false: the caller then
// returns at once.
//
//	dir, ok := fulldisk.Mount(t, 8<<20)
//	if !ok {
//		return
//	}
func Mount(t *testing.T, size int64) (dir string, ok bool) {
	t.Helper()
	if os.Getenv(envChild) == t.Name() {
		return mountHere(t, size), true
	}
	runChild(t)
	return "", false
}

func runChild(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "mounting a tmpfs needs root, and this runs as uid %d", os.Geteuid())
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	cmd := exec.Command(os.Args[0], "-test.run="+strings.Join(parts, "/"), "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), envChild+"="+t.Name())
	// A private mount namespace for the child: Go makes its mounts
	// private (MS_REC|MS_PRIVATE on /) before exec, so the tmpfs never
	// shows outside it and goes away with it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil && strings.Contains(string(out), "--- SKIP"):
		unavailable(t, "%s", skipReason(out))
	case err == nil:
		t.Logf("child process in a private mount namespace:\n%s", out)
	case errors.As(err, &exit):
		t.Fatalf("child process in a private mount namespace failed (%v):\n%s", err, out)
	default:
		unavailable(t, "cannot start a process in a private mount namespace: %v", err)
	}
}

func mountHere(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", syscall.MS_NOSUID|syscall.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		unavailable(t, "mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// ReadOnly remounts the tmpfs at dir (from Mount) read-only, so that
// writes fail with EROFS, and returns a function that makes it writable
// again.
func ReadOnly(t *testing.T, dir string) (restore func()) {
	t.Helper()
	if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount %s read-only: %v", dir, err)
	}
	return func() {
		t.Helper()
		if err := syscall.Mount("", dir, "", syscall.MS_REMOUNT, ""); err != nil {
			t.Fatalf("remount %s read-write: %v", dir, err)
		}
	}
}
