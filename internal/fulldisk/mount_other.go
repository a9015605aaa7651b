//go:build !linux

package fulldisk

import (
	"runtime"
	"testing"
)

// Mount skips the test (fails it under CI=true): mounting a private tmpfs
// needs Linux's mount namespaces.
func Mount(t *testing.T, size int64) (dir string, ok bool) {
	t.Helper()
	unavailable(t, "a private tmpfs needs Linux mount namespaces, and this is %s", runtime.GOOS)
	return "", false
}

// ReadOnly is never reached where Mount skips.
func ReadOnly(t *testing.T, dir string) (restore func()) {
	t.Helper()
	t.Fatal("fulldisk.ReadOnly needs Linux")
	return nil
}
