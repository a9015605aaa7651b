//go:build !linux

package store

import "os"

// preallocate is a no-op where fallocate does not exist: a full disk may
// then also refuse the state write that records a failed save.
func preallocate(*os.File, int64, int64) error { return nil }
