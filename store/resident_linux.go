package store

import (
	"os"
	"syscall"
)

var osPageSize = uintptr(os.Getpagesize())

// releasePages drops this process's resident pages of [lo, hi), widened
// to whole pages but kept within [start, end), from a shared read-only
// file mapping (madvise MADV_DONTNEED). A failure costs only the memory.
func releasePages(start, end, lo, hi uintptr) {
	lo &^= osPageSize - 1
	hi = (hi + osPageSize - 1) &^ (osPageSize - 1)
	lo, hi = max(lo, start&^(osPageSize-1)), min(hi, (end+osPageSize-1)&^(osPageSize-1))
	if hi > lo {
		syscall.Syscall(syscall.SYS_MADVISE, lo, hi-lo, syscall.MADV_DONTNEED)
	}
}
