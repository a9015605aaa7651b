// Package fulldisk gives tests a real file system they can fill: a small
// tmpfs, mounted inside a private mount namespace of a child process (the
// test binary, re-run for the one test), so that writes fail with ENOSPC
// exactly as on a full disk and nothing outside the test sees the mount.
//
// It needs root (CAP_SYS_ADMIN). Where mounting is impossible the test is
// skipped with the reason, except under CI=true, where it fails: CI runs
// as root on the same kind of machine, and a skipped full-disk test there
// would hide a regression.
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

// envChild names the test a child process runs in its own mount namespace.
const envChild = "SKILLREG_FULLDISK_TEST"

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

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("full-disk test cannot run: %s (CI=true: CI runs as root, where it must run)", msg)
	}
	t.Skipf("full-disk test skipped: %s (run as root to include it; under CI=true this fails)", msg)
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

func skipReason(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "full-disk test skipped:") {
			return strings.TrimSpace(l[strings.Index(l, "full-disk test skipped:")+len("full-disk test skipped:"):])
		}
	}
	return "the child process skipped"
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

// Fill writes a file in dir until the file system refuses with ENOSPC,
// and returns a function that deletes it again, making the space free.
func Fill(t *testing.T, dir string) (free func()) {
	t.Helper()
	f, err := os.CreateTemp(dir, "fill-")
	if err != nil {
		t.Fatalf("fill %s: %v", dir, err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for len(buf) > 0 {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v, want ENOSPC", dir, err)
			}
			buf = buf[:len(buf)/2] // fill the last, partial pages too
		}
	}
	// Check that it is full: a one-byte write fails.
	if err := os.WriteFile(f.Name()+".probe", []byte("x"), 0o600); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("after filling %s a write gives %v, want ENOSPC", dir, err)
	}
	os.Remove(f.Name() + ".probe")
	name := f.Name()
	return func() {
		t.Helper()
		if err := os.Remove(name); err != nil {
			t.Fatalf("free %s: %v", dir, err)
		}
	}
}
