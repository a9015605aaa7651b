// Package catalog holds skillreg's values, the queries over them and the
// swap that changes them: sources as configured, the snapshot of one
// source's content, the catalog generation built from every source's
// snapshot, the skill:// URIs that name their files, the sync state of a
// source as it is shown and stored, and Live, the holder of the current
// generation that readers take without waiting and the runner (package
// registry) swaps.
package catalog
