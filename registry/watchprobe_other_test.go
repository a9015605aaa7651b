//go:build !linux

package registry

import "testing"

// needWatches is a no-op where the watcher is fsnotify's (see the Linux
// one): those kernels' limits are not probed.
func needWatches(*testing.T, string) {}
