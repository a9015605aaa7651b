//go:build !linux

package store

import "os"

// releaseMappings is a no-op where the process's mappings cannot be
// listed: after bbolt panics while opening a damaged file, the file stays
// locked until the process exits.
func releaseMappings(*os.File) {}
