package store

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// releaseMappings unmaps every mapping of f's file in this process.
//
// bbolt maps the file while opening it; when it then panics on a damaged
// file (its freelist page, say), the mapping stays, and with it the open
// file and its lock: the process could neither rebuild nor reopen the
// file. Only a writable open reads pages beyond the checksummed meta
// pages, and its exclusive lock was granted, so no other store in this
// process maps the file: every mapping of it is the abandoned one.
func releaseMappings(f *os.File) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	// Lines read "start-end perms offset major:minor inode path".
	for line := range strings.SplitSeq(string(maps), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 {
			continue
		}
		if ino, err := strconv.ParseUint(fields[4], 10, 64); err != nil || ino != st.Ino {
			continue
		}
		majS, minS, ok := strings.Cut(fields[3], ":")
		maj, err1 := strconv.ParseUint(majS, 16, 32)
		min, err2 := strconv.ParseUint(minS, 16, 32)
		if !ok || err1 != nil || err2 != nil || mkdev(maj, min) != st.Dev {
			continue
		}
		startS, endS, ok := strings.Cut(fields[0], "-")
		start, err1 := strconv.ParseUint(startS, 16, 64)
		end, err2 := strconv.ParseUint(endS, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		syscall.Syscall(syscall.SYS_MUNMAP, uintptr(start), uintptr(end-start), 0)
	}
}

// mkdev encodes a device number the way Linux's stat reports it.
func mkdev(major, minor uint64) uint64 {
	return (major&0xfffff000)<<32 | (major&0xfff)<<8 | (minor&0xffffff00)<<12 | minor&0xff
}
