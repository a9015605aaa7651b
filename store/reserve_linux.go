package store

import (
	"os"
	"syscall"
)

// fallocKeepSize is FALLOC_FL_KEEP_SIZE: allocate without changing the
// file's size.
const fallocKeepSize = 0x1

// preallocate makes sure the file's blocks from off to off+n exist on
// disk, without changing its size: bbolt grows its file with ftruncate,
// which on most file systems allocates nothing, so a write there can
// still fail with ENOSPC. Preallocated, they take the small writes (a
// source's state) that record a failure on a full disk.
func preallocate(f *os.File, off, n int64) error {
	return syscall.Fallocate(int(f.Fd()), fallocKeepSize, off, n)
}
