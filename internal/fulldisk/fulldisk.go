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
	"strings"
	"syscall"
	"testing"

	"github.com/skillreg/skillreg/internal/tools"
)

// envChild names the test a child process runs in its own mount namespace.
const envChild = "SKILLREG_FULLDISK_TEST"

func unavailable(t *testing.T, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	tools.Missing(t, "full-disk test skipped: "+msg+" (run as root to include it; CI runs as root, where it must run)")
}

func skipReason(out []byte) string {
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "full-disk test skipped:") {
			return strings.TrimSpace(l[strings.Index(l, "full-disk test skipped:")+len("full-disk test skipped:"):])
		}
	}
	return "the child process skipped"
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
