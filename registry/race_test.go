//go:build race

package registry

// raceEnabled: the race detector makes sync.Pool drop a quarter of what
// is put back, so allocation counts that rely on pooled readers do not
// hold under it.
const raceEnabled = true
