package packdb

import "errors"

// Sentinel errors; compare with errors.Is. gitstore re-exports the first
// three under its own names, so callers of either package test the same
// values.
var (
	// ErrNotFound means an object is not in the store.
	ErrNotFound = errors.New("object not found")
	// ErrCorrupt means the store holds an object or a pack that does not
	// decode or does not hash to its id: the disk's fault, not the
	// network's.
	ErrCorrupt = errors.New("corrupt object store")
	// ErrTooLarge means an object, a delta or a pack exceeded a bound.
	ErrTooLarge = errors.New("too large")
	// ErrMalformed means a pack being ingested does not parse: a bad
	// header, a truncated entry, a checksum mismatch, a delta whose base
	// neither the pack nor the store has. The sender is at fault.
	ErrMalformed = errors.New("malformed pack")
)
